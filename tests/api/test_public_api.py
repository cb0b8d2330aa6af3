"""kfstack's public API (``kfstack.api``): what it names, the reference page generated from it,
and the teams' code held to it -- the examples and a project ``kfstack init`` makes import
nothing else of kfstack, checked by an AST scan and by the import-linter contract they carry."""

from __future__ import annotations

import ast
import importlib
import os
import pathlib
import subprocess
import sys
import types

import pytest

from kfstack.api import reference
from tests.conftest import REPO_ROOT

API = "kfstack.api"
LINT_IMPORTS = pathlib.Path(sys.executable).with_name("lint-imports")


def kfstack_imports(paths) -> dict[str, set[str]]:
    """kfstack module -> the files that import it (``import`` and ``from ... import``, at any
    depth of the file, function bodies included)."""
    found: dict[str, set[str]] = {}
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            elif isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            else:
                continue
            for module in modules:
                if module == "kfstack" or module.startswith("kfstack."):
                    found.setdefault(module, set()).add(str(path))
    return found


def outside_the_api(found: dict[str, set[str]]) -> dict[str, set[str]]:
    return {m: files for m, files in found.items() if m != API and not m.startswith(f"{API}.")}


def test_the_scan_finds_an_internal_import_anywhere_in_a_file(tmp_path):
    code = tmp_path / "code.py"
    code.write_text("from kfstack.api import setting\n\ndef f():\n    from kfstack.training import shards\n")
    assert outside_the_api(kfstack_imports([code])) == {"kfstack.training": {str(code)}}


def test_the_examples_import_nothing_of_kfstack_but_its_api():
    found = kfstack_imports((REPO_ROOT / "examples").rglob("*.py"))
    assert found, "the scan saw the examples"
    assert outside_the_api(found) == {}


@pytest.mark.parametrize("framework", ["pytorch", "tensorflow"])
def test_a_new_project_imports_nothing_of_kfstack_but_its_api(tmp_path, capsys, framework):
    from kfstack.app import cli

    directory = tmp_path / "churn"
    assert cli.main(["init", str(directory), "--framework", framework]) == 0, capsys.readouterr().err
    found = kfstack_imports(directory.rglob("*.py"))
    assert API in found or any(m.startswith(f"{API}.") for m in found)
    assert outside_the_api(found) == {}
    # Its own import-linter contract says the same, and would say otherwise (a second module
    # importing an internal one breaks it).
    lint = [str(LINT_IMPORTS), "--no-cache"]
    env = {"PYTHONPATH": str(directory), "PATH": str(LINT_IMPORTS.parent)}
    kept = subprocess.run(lint, cwd=directory, env=env, capture_output=True, text=True)
    assert kept.returncode == 0, kept.stdout + kept.stderr
    (directory / "churn" / "internal.py").write_text("from kfstack.training import shards\n")
    broken = subprocess.run(lint, cwd=directory, env=env, capture_output=True, text=True)
    assert broken.returncode == 1 and "churn.internal -> kfstack.training" in broken.stdout, broken.stdout


def _public(module: types.ModuleType) -> set[str]:
    """What a module binds that is neither private nor a submodule of the API package."""
    return {
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }


@pytest.mark.parametrize("name", reference.MODULES)
def test_each_api_module_lists_exactly_what_it_binds(name):
    module = importlib.import_module(name)
    listed = module.__all__
    assert len(listed) == len(set(listed)), "a name listed twice"
    assert set(listed) == _public(module)


def test_the_reference_page_is_generated_from_the_api():
    assert reference.PAGE.read_text() == reference.page(), "run: python -m kfstack.api.reference"


def test_a_team_s_code_imports_the_light_api_without_the_heavy_libraries():
    # Every step's code may import kfstack.api: it must not cost kfp, Spark or a framework.
    # The training helpers are imported by training code inside its framework's process: not
    # kfp, Spark or kserve either.
    probe = (
        "import sys, kfstack.api, kfstack.api.training; "
        "print(sorted(m for m in ('kfp', 'pyspark', 'torch', 'tensorflow', 'kserve') if m in sys.modules))"
    )
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "[]"


def test_a_package_registering_its_pipelines_imports_in_a_kfp_task(tmp_path):
    # Every step of a team's code imports its package's __init__, which registers the package's
    # pipelines; inside a KFP task kfp runs in its runtime mode, where no component can be
    # defined. The registration must import there (kfstack.api, not kfstack.api.pipeline).
    package = tmp_path / "team"
    package.mkdir()
    (package / "__init__.py").write_text(
        'from kfstack.api import PipelineEntry\n\nTRAINING = PipelineEntry(function="team.pipeline:p")\n'
    )
    (package / "prepare.py").write_text("from kfstack.api import write_report\n")
    env = {**os.environ, "_KFP_RUNTIME": "true", "PYTHONPATH": str(tmp_path)}
    imported = subprocess.run(
        [sys.executable, "-c", "import team.prepare"], env=env, capture_output=True, text=True
    )
    assert imported.returncode == 0, imported.stderr
    # What failed before: the components under kfp's runtime mode.
    components = subprocess.run(
        [sys.executable, "-c", "import kfstack.api.pipeline"], env=env, capture_output=True, text=True
    )
    assert components.returncode != 0 and "has no attribute 'component'" in components.stderr
