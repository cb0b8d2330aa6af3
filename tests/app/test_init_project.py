"""``kfstack init DIR``: a new project, from the templates kfstack's wheel ships, that runs and
tests at once.

The default suite writes projects of every framework and task, checks what was written, and
compiles and renders each project's pipeline through kfstack as an installed package's (its
``*.dist-info`` in a site folder on the path). The ``slow`` test does what a team does, from
kfstack's wheel: it builds the wheel, installs it into a throwaway venv (the other packages are
linked from this venv, so nothing is downloaded), runs ``kfstack init`` there, installs the new
project and runs the project's own tests -- its pipeline embedded, end to end.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest
import yaml

from kfstack import distributions
from kfstack.app import cli, project
from kfstack.version import __version__
from tests.conftest import REPO_ROOT
from tests.frameworks import needs_torch
from tests.installed import install_metadata
from tests.upstream_crds import validate_with_crds

COMBINATIONS = [(f, t, v) for f in project.FRAMEWORKS for t in project.TASKS for v in project.SERVINGS]
JOB_KIND = {"pytorch": {"PyTorchJob", "TrainJob"}, "tensorflow": {"TFJob"}}


@pytest.fixture(autouse=True)
def _forget_project_modules(tmp_path):
    """A test that imports a project it wrote (render, compile) leaves its modules imported
    under the project's names; they go when it ends, or a later test importing its own package
    of that name would get this one."""
    yield
    written = [
        name
        for name, module in sys.modules.items()
        if Path(getattr(module, "__file__", None) or "/").is_relative_to(tmp_path)
    ]
    for name in written:
        del sys.modules[name]


def init(capsys, directory: Path, *options: str) -> str:
    assert cli.main(["init", str(directory), *options]) == 0, capsys.readouterr().err
    return capsys.readouterr().out


def install(site: Path, directory: Path) -> None:
    """The project as pip installs it editable: its folder on the path and its metadata."""
    config = tomllib.loads((directory / "pyproject.toml").read_text())["project"]
    install_metadata(site, config["name"], config["entry-points"], version=config["version"])


@pytest.mark.parametrize(("framework", "task", "serving"), COMBINATIONS)
def test_a_new_project_is_complete_and_its_pipeline_compiles_and_renders(
    tmp_path, capsys, monkeypatch, framework, task, serving
):
    name = f"churn-{framework[:2]}-{task[:3]}-{serving[:3]}"
    directory = tmp_path / "work" / name
    out = init(capsys, directory, "--framework", framework, "--task", task, "--serving", serving)
    assert f"pipeline {name}-training ({framework}, {task}, {serving} serving)" in out and "make run" in out
    package = name.replace("-", "_")
    written = {p.relative_to(directory).as_posix() for p in directory.rglob("*") if p.is_file()}
    own_server = {f"{package}/predictor.py", "images/predictor.Dockerfile", "manifests/serving-runtime.yaml"}
    assert written == {
        ".gitignore", "Makefile", "README.md", "pyproject.toml", "requirements-kfstack.txt",
        f"{package}/__init__.py", f"{package}/prepare.py", f"{package}/train.py", f"{package}/pipeline.py",
        f"{package}/data/sample.csv", "tests/test_pipeline.py",
        ".dockerignore", "images/launcher.Dockerfile", "images/spark.Dockerfile", "images/trainer.Dockerfile",
    } | (own_server if serving == "custom" else set()) | {".kfstack.mk"}  # fmt: skip
    for path in written:
        # KServe fills {{.Name}} in a ServingRuntime; every mark of kfstack's is filled.
        text = (directory / path).read_text().replace("{{.Name}}", "")
        assert "{{" not in text, path
        if path.endswith(".py"):
            compile(text, path, "exec")
    config = tomllib.loads((directory / "pyproject.toml").read_text())
    assert f"kfstack=={__version__}" in config["project"]["dependencies"]
    assert config["project"]["entry-points"]["kfstack.pipelines"] == {
        f"{name}-training": f"{package}:TRAINING"
    }
    # The checkout this kfstack runs from is where the project installs it from by default.
    # With the embedded platform of its framework only (a PyTorch team installs no TensorFlow),
    # and the distributions of ONNX Runtime (and TensorFlow) this environment has.
    extra = project.embedded_extras(framework)
    wanted = {"pytorch": "local-torch,onnxruntime", "tensorflow": "local-tf,onnxruntime,tensorflow-cpu"}
    assert extra == wanted[framework]
    assert (directory / "requirements-kfstack.txt").read_text().splitlines()[-1] == (
        f"kfstack[{extra}] @ {REPO_ROOT.resolve().as_uri()}"
    )
    assert f"kfstack[{extra}]=={__version__}" in config["project"]["optional-dependencies"]["dev"]
    # Its commands reuse the environment init ran in (this test's venv), named in a file of
    # this machine's that git leaves out.
    assert (directory / ".kfstack.mk").read_text().splitlines()[-1] == f"VENV ?= {sys.prefix}"
    assert ".kfstack.mk" in (directory / ".gitignore").read_text().splitlines()
    assert f"kfstack-{project.FRAMEWORKS[framework]['trainer_role']}:" in (
        (directory / "images" / "trainer.Dockerfile").read_text()
    )
    # The bundled sample: the task's labels (its classes, or numbers), three malformed rows among
    # 600, one of them in the label.
    rows = (directory / package / "data" / "sample.csv").read_text().splitlines()
    labels = [row.rsplit(",", 1)[1] for row in rows[1:]]
    assert len(rows) == 601
    if task == "regression":
        assert [label for label in labels if not label.replace(".", "").lstrip("-").isdigit()] == ["high"]
    else:
        classes = int(project.TASKS[task]["outputs"])
        assert set(labels) == {str(c) for c in range(classes)} | {"7"}

    site = tmp_path / "site"
    install(site, directory)
    monkeypatch.syspath_prepend(str(directory))
    monkeypatch.syspath_prepend(str(site))
    assert cli.main(["describe", f"{name}-training"]) == 0
    described = capsys.readouterr().out
    assert "hidden_units" in described
    # The project's 8 trials are a cluster run's; an embedded run takes its local budget of 4.
    assert "a cluster run: 8; an embedded run (kfstack run --local): 4, unless set" in described
    rendered = tmp_path / "objects"
    assert cli.main(["render", f"{name}-training", "--out", str(rendered), "--param", "training_api=v1"]) == 0
    capsys.readouterr()
    kinds = {yaml.safe_load(p.read_text())["kind"] for p in rendered.glob("*.yaml")}
    assert {"SparkApplication", "Experiment", "InferenceService"} <= kinds and kinds & JOB_KIND[framework]
    if serving == "custom":
        _serves_with_its_own_runtime(tmp_path, directory, name, package, rendered)


def _serves_with_its_own_runtime(tmp_path: Path, directory: Path, name: str, package: str, rendered: Path):
    """The project's ServingRuntime is a valid object running kfstack's public `kfstack serve`
    with the project's model class, and the rendered InferenceService asks for it by name and
    format."""
    (runtime,) = [
        o for o in yaml.safe_load_all((directory / "manifests/serving-runtime.yaml").read_text()) if o
    ]
    validate_with_crds(tmp_path, [runtime])
    (container,) = runtime["spec"]["containers"]
    assert container["command"] == ["kfstack", "serve"]  # the console script, not an internal module
    args, passed_on = cli.build_parser().parse_known_args([*container["command"][1:], *container["args"]])
    assert (args.command, args.format, args.predictor, args.model, args.address, passed_on) == (
        "serve",
        "custom",
        f"{package}.predictor:Model",
        "/mnt/models",
        "0.0.0.0",  # a pod's port is reached from outside it
        [],
    )
    (service,) = [
        doc
        for p in rendered.glob("*.yaml")
        if (doc := yaml.safe_load(p.read_text()))["kind"] == "InferenceService"
    ]
    model = service["spec"]["predictor"]["model"]
    assert model["runtime"] == runtime["metadata"]["name"] == f"{name}-predictor"
    assert model["modelFormat"]["name"] == runtime["spec"]["supportedModelFormats"][0]["name"] == name


def test_the_frameworks_extras_install_one_framework():
    """A PyTorch team's install holds no TensorFlow, and the reverse; `local` keeps both."""
    extras = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    torch, tf = extras["local-torch"][0], extras["local-tf"][0]
    assert "torch" in torch and ",tf," not in torch and "tf" in tf and "torch" not in tf
    assert {project.FRAMEWORKS[f]["local_extra"] for f in project.FRAMEWORKS} == {"local-torch", "local-tf"}


def test_a_project_keeps_the_gpu_distributions_its_environment_has(monkeypatch):
    """Made where onnxruntime-gpu and tensorflow are installed, a project names their extras, so
    that installing it puts no CPU distribution beside them."""
    monkeypatch.setattr(
        distributions.importlib.metadata,
        "packages_distributions",
        lambda: {"onnxruntime": ["onnxruntime_gpu"], "tensorflow": ["tensorflow"]},
    )
    assert project.embedded_extras("tensorflow") == "local-tf,onnxruntime-gpu,tensorflow"
    assert project.embedded_extras("pytorch") == "local-torch,onnxruntime-gpu"


def test_init_says_early_what_the_machine_lacks(monkeypatch):
    monkeypatch.setattr(project.shutil, "which", lambda name: None)
    notes = project.prerequisite_notes()
    assert any("no java on PATH: the Spark step needs Java 17" in note for note in notes)


def test_without_a_venv_the_project_says_it_creates_one(tmp_path, monkeypatch):
    monkeypatch.setattr(project.sys, "prefix", project.sys.base_prefix)
    made = project.plan(str(tmp_path / "churn"), None, "pytorch", "binary", None)
    written = project.create(made)
    assert not (tmp_path / "churn" / ".kfstack.mk").exists() and written
    assert "make run     # create .venv there and install kfstack and the project" in project.next_steps(made)


def test_init_refuses_before_writing_anything(tmp_path, capsys):
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "notes.txt").write_text("mine")
    assert cli.main(["init", str(taken)]) == 2
    assert "not an empty directory" in capsys.readouterr().err
    assert sorted(p.name for p in taken.iterdir()) == ["notes.txt"]
    for argv, message in [
        ([str(tmp_path / "Bad_Name")], "lower-case letters, digits and '-'"),
        ([str(tmp_path / "x"), "--name", "kfstack"], "a module named 'kfstack' exists already"),
        ([str(tmp_path / "x"), "--name", "class"], "a module named 'class' exists already"),
        ([str(tmp_path / "y"), "--kfstack-source", str(tmp_path)], "neither a kfstack checkout"),
    ]:
        assert cli.main(["init", *argv]) == 2
        assert message in capsys.readouterr().err
    assert (
        not (tmp_path / "x").exists()
        and not (tmp_path / "y").exists()
        and not (tmp_path / "Bad_Name").exists()
    )


def test_the_kfstack_source_is_a_wheel_a_git_url_or_a_checkout(tmp_path):
    wheel = tmp_path / f"kfstack-{__version__}-py3-none-any.whl"
    wheel.write_bytes(b"")
    assert project.kfstack_source(str(wheel)) == (f"kfstack[local] @ {wheel.as_uri()}", "a wheel")
    url = f"git+https://github.com/example/kfstack@v{__version__}"
    assert project.kfstack_source(url) == (f"kfstack[local] @ {url}", "a git URL")
    assert project.kfstack_source(str(REPO_ROOT))[0] == f"kfstack[local] @ {REPO_ROOT.resolve().as_uri()}"


def test_every_template_mark_has_a_value_and_a_missing_one_is_named():
    values = project.plan("unused-dir-name", "demo", "pytorch", "binary", None).values()
    for template in project.TEMPLATE.rglob("*.tmpl"):
        project.fill(template.read_text(), values, template.name)  # raises on a mark with no value
    with pytest.raises(KeyError, match=r"x.tmpl: template mark \{\{nope\}\} has no value"):
        project.fill("{{nope}}", values, "x.tmpl")


# --- from kfstack's wheel, as a team starts ------------------------------------------------------


def _venv_from_wheel(tmp_path: Path) -> Path:
    """A throwaway venv with kfstack installed from its wheel, the rest linked from this venv."""
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(REPO_ROOT / name, source / name)
    for folder in ("kfstack", "components", "pipelines", "spark_jobs"):
        shutil.copytree(
            REPO_ROOT / folder, source / folder, symlinks=True, ignore=shutil.ignore_patterns("__pycache__")
        )
    wheels = tmp_path / "wheels"
    pip = [sys.executable, "-m", "pip"]
    subprocess.run(
        [*pip, "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", wheels, "."], cwd=source, check=True
    )
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    ours = Path(sysconfig.get_paths()["purelib"])
    theirs = venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    for entry in ours.iterdir():
        # Everything but kfstack itself and its examples, and the editable installs' hooks.
        if not entry.name.startswith(("kfstack", "__editable__")):
            (theirs / entry.name).symlink_to(entry)
    (wheel,) = wheels.glob("kfstack-*.whl")
    subprocess.run([venv / "bin" / "python", "-m", "pip", "install", "-q", "--no-deps", wheel], check=True)
    return venv


@pytest.mark.slow
# Every option value in one project at least: both frameworks, the three tasks, both servings.
@pytest.mark.parametrize(
    ("framework", "task", "serving"),
    [
        pytest.param("pytorch", "binary", "standard", marks=needs_torch),
        ("tensorflow", "multiclass", "custom"),
        pytest.param("pytorch", "regression", "standard", marks=needs_torch),
    ],
)
def test_a_project_made_from_the_wheel_passes_its_own_tests(tmp_path, framework, task, serving):
    venv = _venv_from_wheel(tmp_path)
    python = str(venv / "bin" / "python")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    work = tmp_path / "projects"
    work.mkdir()
    made = subprocess.run(
        [venv / "bin" / "kfstack", "init", "churn", "--framework", framework, "--task", task,
         "--serving", serving],
        cwd=work, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert "created churn" in made.stdout
    # Templates come from the wheel, not from this checkout.
    where = subprocess.run(
        [python, "-c", "import kfstack.app.project as p; print(p.TEMPLATE)"], cwd=work, env=env,
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert str(venv) in where.stdout
    # The project's own commands, as a team types them: `make test` installs the project into the
    # environment init ran in (no second kfstack install, no .venv of its own), then runs its tests.
    # One project's tests on cluster-like locations (s3:// URIs of a loopback S3 server for its
    # training code, file:// ones for its Spark step): its template code must treat a location
    # as a URI.
    uri_locations = {"KFSTACK_URI_LOCATIONS": "1"} if task == "regression" else {}
    tests = subprocess.run(
        ["make", "test"], cwd=work / "churn", env={**env, **uri_locations}, capture_output=True, text=True,
        timeout=1500,
    )  # fmt: skip
    assert tests.returncode == 0, tests.stdout[-4000:] + tests.stderr[-2000:]
    assert f"make: installing churn and its tests' packages into {venv}" in tests.stdout
    assert "installing kfstack" not in tests.stdout and not (work / "churn" / ".venv").exists()
    assert "2 passed" in tests.stdout
    # From the folder above, churn/ is the project's folder, not the package: refused at once.
    shadowed = subprocess.run(
        [venv / "bin" / "kfstack", "describe", "churn-training"], cwd=work, env=env, capture_output=True,
        text=True,
    )  # fmt: skip
    assert shadowed.returncode == 2 and "cd churn" in shadowed.stderr, shadowed.stderr
    if (framework, task) != ("pytorch", "binary"):
        return  # one project's reproduction is enough: the lineage is the same for every task
    # A model of the project, reproduced from its lineage alone: the record names the pipeline.
    kfstack = str(venv / "bin" / "kfstack")
    summary = tmp_path / "summary.json"
    quick = ["--param", "tune=false", "--param", "epochs=3", "--param", "deploy=false"]
    run = [
        kfstack,
        "run",
        "--local",
        "churn-training",
        "--pipeline-root",
        "runs",
        "--summary-json",
        str(summary),
    ]
    subprocess.run([*run, *quick], cwd=work / "churn", env=env, capture_output=True, check=True, timeout=900)
    model_dir = json.loads(summary.read_text())["artifacts"]["model"]
    assert json.loads((Path(model_dir) / "lineage.json").read_text())["pipeline"] == "churn-training"
    again = subprocess.run(
        [kfstack, "reproduce", model_dir, "--pipeline-root", "reproductions"], cwd=work / "churn", env=env,
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-2000:]
    assert "reproduced" in again.stdout and " NO " not in again.stdout


def test_a_predictor_the_shipped_runtime_does_not_serve_fails_render_naming_both(
    tmp_path, capsys, monkeypatch
):
    """A team renames its model class on the page and not in manifests/serving-runtime.yaml:
    render refuses, naming the file's class and the page's, before a cluster's pod would fail
    to import it."""
    directory = tmp_path / "diabetes"
    init(capsys, directory, "--framework", "tensorflow", "--task", "binary", "--serving", "custom")
    pipeline = directory / "diabetes" / "pipeline.py"
    text = pipeline.read_text()
    assert '"diabetes.predictor:Model"' in text
    pipeline.write_text(text.replace('"diabetes.predictor:Model"', '"diabetes.predictor:DiabetesModel"'))
    site = tmp_path / "site"
    install(site, directory)
    monkeypatch.syspath_prepend(str(directory))
    monkeypatch.syspath_prepend(str(site))
    argv = ["render", "diabetes-training", "--out", str(tmp_path / "objects"), "--param", "training_api=v1"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert (
        "diabetes-training: model-deployment: manifests/serving-runtime.yaml (ServingRuntime "
        "diabetes-predictor) serves predictor diabetes.predictor:Model, but the pipeline's Predictor is "
        "diabetes.predictor:DiabetesModel"
    ) in err
    assert not (tmp_path / "objects").exists()
    # The file made to match the page: rendered, with a warning that its image is still the
    # template's placeholder.
    runtime = directory / "manifests" / "serving-runtime.yaml"
    runtime.write_text(runtime.read_text().replace("predictor:Model", "predictor:DiabetesModel"))
    assert cli.main(argv) == 0
    assert "names image ghcr.io/your-team/diabetes-predictor:" in capsys.readouterr().err
