"""``kfstack init DIR``: a new project a team can run and test at once.

The project is kfstack's shape for a team's own code: its ``pyproject.toml`` depends on kfstack
and declares its pipeline in the ``kfstack.pipelines`` entry-point group; a PySpark data step,
training code (PyTorch or TensorFlow; a binary or multiclass classifier, or a regression), a
pipeline built on kfstack's public components, a bundled sample data set, tests that run the
pipeline embedded, one Dockerfile per role ``FROM`` kfstack's images, and a README whose two
commands set it up, run it and test it. The templates ship in kfstack's wheel
(``project-template/``); ``{{name}}`` marks what is filled in.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import keyword
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from kfstack import distributions
from kfstack.errors import UsageError
from kfstack.version import __version__

TEMPLATE = Path(__file__).with_name("project-template")
PROJECT_NAME = re.compile(r"[a-z][a-z0-9-]{0,39}\Z")
_MARK = re.compile(r"\{\{(\w+)\}\}")
# What each framework's project says and which kfstack image its trainer builds on.
FRAMEWORKS = {
    "pytorch": {
        "framework_title": "PyTorch",
        "job_kind": "PyTorchJob or TrainJob",
        "trainer_role": "torch-trainer",
        "local_extra": "local-torch",
        "tensorflow_extra_note": "",
    },
    "tensorflow": {
        "framework_title": "TensorFlow",
        "job_kind": "TFJob",
        "trainer_role": "tf-trainer",
        "local_extra": "local-tf",
        "tensorflow_extra_note": ", `tensorflow-cpu` or `tensorflow`",
    },
}
# What differs between the tasks in the project's code: its label, the model's outputs, loss,
# metric and export, and what the project's test asks of a model that learned (the synthetic
# labels follow the features).
_CLASSIFIER = {
    "score_metric": "val_accuracy",
    "direction": "maximize",
    "label_type": "int",
    "label_dtype": "int64",
    "label_shape": "-1",
    "outputs_meaning": "one per class",
    "torch_loss": "nn.CrossEntropyLoss()",
    "torch_score": "float((outputs.argmax(dim=1).numpy() == y_val).mean())",
    "torch_head": "torch.nn.Softmax(dim=1)",
    "keras_loss": 'keras.losses.SparseCategoricalCrossentropy(reduction="none")',
    "keras_activation": '"softmax"',
    "keras_score": "float(np.mean(outputs.argmax(axis=1) == y_val))",
    "output_name": "probabilities",
    "served": "class probabilities",
    "quality_metric": "accuracy",
}
TASKS = {
    "binary": {
        **_CLASSIFIER,
        "task_title": "binary classifier",
        "outputs": "2",
        "label_rule": 'rules.append(("unknown_label", ~F.col(LABEL).isin(0, 1)))',
        "learned": "a model that learned beats a coin well",
        "learned_check": "> 0.75",
    },
    "multiclass": {
        **_CLASSIFIER,
        "task_title": "multiclass classifier",
        "outputs": "3",
        "label_rule": 'rules.append(("unknown_label", ~F.col(LABEL).isin(0, 1, 2)))',
        "learned": "a model that learned beats a die well",
        "learned_check": "> 0.6",
    },
    "regression": {
        "task_title": "regression",
        "score_metric": "val_rmse",
        "direction": "minimize",
        "label_type": "double",
        "label_dtype": "float32",
        "label_shape": "-1, 1",
        "outputs": "1",
        "outputs_meaning": "the predicted value",
        "torch_loss": "nn.MSELoss()",
        "torch_score": "val_loss**0.5",
        "torch_head": "torch.nn.Identity()",
        "keras_loss": 'keras.losses.MeanSquaredError(reduction="none")',
        "keras_activation": "None",
        "keras_score": "float(np.sqrt(np.mean((outputs - y_val) ** 2)))",
        "output_name": "prediction",
        "served": "the predicted value",
        "quality_metric": "rmse",
        "label_rule": "# Any number is a label (a regression's).",
        # The labels' spread is about 3 and their noise 0.5: the mean alone misses by about 3.
        "learned": "a model that learned misses by far less than the labels' spread (about 3)",
        "learned_check": "< 1.5",
    },
}
# How the model is served: ONNX on KServe's Triton runtime, or this project's own kserve.Model
# (``predictor.py``) in its own image and ServingRuntime (``images/``, ``manifests/``).
SERVINGS = {
    "standard": "KServe's Triton runtime serves the ONNX model",
    "custom": "the project's own kserve.Model serves it, in its image and ServingRuntime",
}
# The files only a project served by its own model server has.
CUSTOM_SERVING_FILES = (
    "package/predictor.py.tmpl",
    "images/predictor.Dockerfile.tmpl",
    "manifests/serving-runtime.yaml.tmpl",
)
DEFAULT_FRAMEWORK, DEFAULT_TASK, DEFAULT_SERVING = "pytorch", "binary", "standard"


@dataclasses.dataclass(frozen=True)
class Project:
    """What ``kfstack init`` was asked for, checked."""

    directory: Path
    name: str
    framework: str
    task: str
    kfstack_requirement: str
    kfstack_source_kind: str
    # The extras kfstack is installed with (:func:`embedded_extras`), found once: the requirement
    # line and the project's dev extra must name the same.
    extras: str
    serving: str = DEFAULT_SERVING

    @property
    def package(self) -> str:
        return self.name.replace("-", "_")

    @property
    def pipeline(self) -> str:
        return f"{self.name}-training"

    def values(self) -> dict[str, str]:
        return {
            "project": self.name,
            "package": self.package,
            "pipeline": self.pipeline,
            "function": f"{self.package}_training",
            "serving_name": self.name,
            "framework": self.framework,
            "task": self.task,
            "kfstack_version": __version__,
            "kfstack_requirement": self.kfstack_requirement,
            "kfstack_source_kind": self.kfstack_source_kind,
            **FRAMEWORKS[self.framework],
            "embedded_extras": self.extras,
            **TASKS[self.task],
            **self._serving_values(),
        }

    def _serving_values(self) -> dict[str, str]:
        """The pipeline's lines that say how the model is served (none for the standard way)."""
        if self.serving == "standard":
            return {
                "predictor_import": "",
                "predictor_line": "",
                "model_format_line": "",
                "predictor_readme": "",
                "predictor_cluster_step": "",
                "served_by": SERVINGS[self.serving],
            }
        return {
            "predictor_import": "from kfstack.api.pipeline import Predictor\n",
            "predictor_line": (
                f'    predictor=Predictor(\n        "{self.package}.predictor:Model",\n'
                f'        runtime="{self.name}-predictor",  # manifests/serving-runtime.yaml\n'
                f'        runtime_model_format="{self.name}",\n    ),\n'
            ),
            "model_format_line": '        model_format="custom",  # what the predictor reads: model.onnx\n',
            "predictor_readme": (
                f"| `{self.package}/predictor.py` | the model server, a `kserve.Model` | loads `model.onnx` "
                "from its model directory, answers V1 `instances` (rows of the features); a 400 for what "
                "it cannot read |\n"
                "| `manifests/serving-runtime.yaml` | its ServingRuntime on a cluster | runs `kfstack serve` "
                "with the class, in `images/predictor.Dockerfile`'s image |\n"
            ),
            "predictor_cluster_step": (
                "   Build and push `images/predictor.Dockerfile` the same way (role `predictor`), set the "
                "image in `manifests/serving-runtime.yaml` to it, and apply it in each namespace the "
                "pipeline deploys into: `kubectl apply -n <namespace> -f manifests/serving-runtime.yaml`.\n\n"
            ),
            "served_by": SERVINGS[self.serving],
        }


def embedded_extras(framework: str) -> str:
    """The extras of kfstack a project's embedded platform installs: its framework's, the ONNX
    Runtime (every project exports ONNX) and, for TensorFlow, TensorFlow itself -- each in the
    distribution this environment has, else the CPU one (:func:`kfstack.distributions.extra_for`),
    so that installing the project never puts a second distribution beside a team's."""
    modules = ["onnxruntime"] + (["tensorflow"] if framework == "tensorflow" else [])
    return ",".join([FRAMEWORKS[framework]["local_extra"], *map(distributions.extra_for, modules)])


def kfstack_source(given: str | None, extra: str = "local") -> tuple[str, str]:
    """The requirement line kfstack is installed from, with ``extra`` (the embedded platform for
    the project's framework), and what kind of source it is.

    ``given``: a kfstack checkout or a wheel file (a path), or a ``git+`` URL; none: the
    checkout this kfstack runs from, else the release pinned (for an index or a wheelhouse the
    team's pip is pointed at).

    Raises:
        UsageError: A path that is neither a kfstack checkout nor a kfstack wheel.
    """
    if given is None:
        checkout = Path(__file__).resolve().parents[2]
        if (checkout / "pyproject.toml").is_file() and (checkout / "kfstack" / "version.py").is_file():
            given = str(checkout)
        else:
            return (
                f"kfstack[{extra}]=={__version__}",
                "the release pinned, from whatever index or wheelhouse pip is given",
            )
    if given.startswith("git+"):
        return f"kfstack[{extra}] @ {given}", "a git URL"
    path = Path(given).expanduser().resolve()
    if path.is_file() and path.name.startswith("kfstack-") and path.suffix == ".whl":
        return f"kfstack[{extra}] @ {path.as_uri()}", "a wheel"
    if path.is_dir() and (path / "kfstack" / "version.py").is_file():
        return f"kfstack[{extra}] @ {path.as_uri()}", "a checkout of kfstack (a path)"
    raise UsageError(
        f"--kfstack-source {given}: neither a kfstack checkout, a kfstack-*.whl file nor a git+ URL"
    )


def plan(
    directory: str,
    name: str | None,
    framework: str,
    task: str,
    source: str | None,
    serving: str = DEFAULT_SERVING,
) -> Project:
    """Checks everything before a file is written.

    Raises:
        UsageError: A non-empty directory, a name that cannot be a package or is taken, an unknown
            framework or task, a bad kfstack source.
    """
    target = Path(directory).expanduser().resolve()
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise UsageError(f"{directory}: not an empty directory; kfstack init writes a new project only")
    name = name or target.name
    if not PROJECT_NAME.match(name) or name.endswith("-"):
        raise UsageError(
            f"project name {name!r}: lower-case letters, digits and '-', starting with a letter, at "
            "most 40 characters (give --name)"
        )
    package = name.replace("-", "_")
    if keyword.iskeyword(package) or importlib.util.find_spec(package) is not None:
        raise UsageError(f"project name {name!r}: a module named {package!r} exists already; give --name")
    if framework not in FRAMEWORKS:
        raise UsageError(f"--framework {framework}: one of {', '.join(FRAMEWORKS)}")
    if task not in TASKS:
        raise UsageError(f"--task {task}: one of {', '.join(TASKS)}")
    if serving not in SERVINGS:
        raise UsageError(f"--serving {serving}: one of {', '.join(SERVINGS)}")
    extras = embedded_extras(framework)
    requirement, kind = kfstack_source(source, extras)
    return Project(target, name, framework, task, requirement, kind, extras, serving)


def _destination(project: Project, template: Path) -> Path | None:
    """Where a template file goes in the project (None: not this project's choice)."""
    relative = template.relative_to(TEMPLATE).as_posix()
    if relative in CUSTOM_SERVING_FILES and project.serving != "custom":
        return None
    if relative.startswith("package/train_"):
        if relative != f"package/train_{project.framework}.py.tmpl":
            return None
        relative = "package/train.py.tmpl"
    if relative.startswith("package/data/sample_"):
        if relative != f"package/data/sample_{project.task}.csv":
            return None
        relative = "package/data/sample.csv"
    if relative in ("gitignore.tmpl", "dockerignore.tmpl"):
        relative = "." + relative
    relative = relative.removesuffix(".tmpl")
    if relative.startswith("package/"):
        relative = project.package + relative[len("package") :]
    return project.directory / relative


def fill(text: str, values: dict[str, str], where: str) -> str:
    """``text`` with every ``{{name}}`` replaced.

    Raises:
        KeyError: A mark with no value (a template's mistake, never the user's).
    """

    def value(match: re.Match[str]) -> str:
        if match.group(1) not in values:
            raise KeyError(f"{where}: template mark {match.group(0)} has no value")
        return values[match.group(1)]

    return _MARK.sub(value, text)


def create(project: Project) -> list[Path]:
    """Writes the project; returns the files written."""
    values = project.values()
    written = []
    for template in sorted(p for p in TEMPLATE.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        destination = _destination(project, template)
        if destination is None:
            continue
        destination.parent.mkdir(parents=True, exist_ok=True)
        if template.suffix == ".tmpl":
            destination.write_text(
                fill(template.read_text(encoding="utf-8"), values, template.name), encoding="utf-8"
            )
        else:
            destination.write_bytes(template.read_bytes())
        written.append(destination)
    venv = current_venv()
    if venv:
        # This machine's, not the project's: the Makefile reads it, .gitignore leaves it out.
        local = project.directory / ENVIRONMENT_FILE
        local.write_text(
            f"# The environment kfstack init ran in: `make` installs the project into it.\nVENV ?= {venv}\n",
            encoding="utf-8",
        )
        written.append(local)
    return written


# Where a project's Makefile reads the environment it was made from.
ENVIRONMENT_FILE = ".kfstack.mk"


def current_venv() -> str | None:
    """The virtual environment this kfstack runs in, where it runs in one."""
    return sys.prefix if sys.prefix != sys.base_prefix else None


def prerequisite_notes() -> list[str]:
    """What this machine lacks for a project's first run: a supported Python and Java 17 (Spark's)."""
    notes = []
    if not (3, 11) <= sys.version_info[:2] <= (3, 13):
        notes.append(
            f"kfstack is built and tested on Python 3.11 to 3.13; this is "
            f"{sys.version_info[0]}.{sys.version_info[1]}"
        )
    java = shutil.which("java")
    if java is None:
        notes.append(
            "no java on PATH: the Spark step needs Java 17 (e.g. apt-get install openjdk-17-jre-headless)"
        )
        return notes
    try:
        version = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30).stderr
    except (OSError, subprocess.SubprocessError):
        return notes
    found = re.search(r'version "(\d+)', version)
    if found and int(found.group(1)) < 17:
        notes.append(f"java {found.group(1)} on PATH: the Spark step needs Java 17 or newer")
    return notes


def next_steps(project: Project) -> str:
    venv = current_venv()
    where = (
        f"install the project into {venv} (this environment)"
        if venv
        else "create .venv there and install kfstack and the project"
    )
    here = os.path.relpath(project.directory)
    if here.startswith(".."):
        here = str(project.directory)
    return (
        f"created {project.name} in {here}: pipeline {project.pipeline} "
        f"({project.framework}, {project.task}, {project.serving} serving); kfstack from "
        f"{project.kfstack_requirement}\n"
        f"  cd {here} && make run     # {where}, then run the pipeline embedded\n"
        f"  cd {here} && make test    # its tests"
    )
