"""Spec tests: every pipeline compiles, without heavy imports, into the structure we intend."""

import json
import subprocess
import sys

import pytest
import yaml

from kfstack import images
from kfstack.cli import compile_pipelines, compiled_path, parse_params
from kfstack.pipelines import PIPELINES, load_pipeline
from kfstack.version import __version__


@pytest.fixture(scope="module")
def flights_spec(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    (path,) = compile_pipelines(["flights-training"], str(out))
    with open(path) as f:
        return yaml.safe_load(f)


def test_compile_writes_versioned_files_without_heavy_imports(tmp_path):
    # A fresh interpreter: compiling must not pull in the frameworks the tasks use.
    code = (
        "import sys, json; from kfstack.cli import main; "
        f"rc = main(['compile', '--out', {str(tmp_path)!r}]); "
        "print(json.dumps([m for m in ('torch', 'pyspark', 'tensorflow', 'onnxruntime') "
        "if m in sys.modules]))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []
    for name in PIPELINES:
        assert (tmp_path / f"{name}-{__version__}.yaml").is_file()
    assert compiled_path("dist/pipelines", "x") == f"dist/pipelines/x-{__version__}.yaml"


def test_flights_training_task_graph(flights_spec):
    tasks = flights_spec["root"]["dag"]["tasks"]
    assert set(tasks) == {
        "validate-training-run", "flights-features", "train-pytorch", "evaluate-model"
    }
    # Parameters are checked before the feature job starts.
    assert tasks["flights-features"]["dependentTasks"] == ["validate-training-run"]
    train_in = tasks["train-pytorch"]["inputs"]["artifacts"]["features"]["taskOutputArtifact"]
    assert train_in == {"outputArtifactKey": "features", "producerTask": "flights-features"}
    eval_in = tasks["evaluate-model"]["inputs"]["artifacts"]
    assert eval_in["model"]["taskOutputArtifact"]["producerTask"] == "train-pytorch"
    assert eval_in["features"]["taskOutputArtifact"]["producerTask"] == "flights-features"
    # The platform parameter reaches every stage that launches work.
    for name in ("validate-training-run", "flights-features", "train-pytorch"):
        platform = tasks[name]["inputs"]["parameters"]["platform"]
        assert platform == {"componentInputParameter": "platform"}


def test_flights_training_parameters_are_typed_documented_and_defaulted(flights_spec):
    params = flights_spec["root"]["inputDefinitions"]["parameters"]
    assert params["platform"]["defaultValue"] == "kubernetes"
    assert params["workers"]["parameterType"] == "NUMBER_INTEGER"
    assert params["learning_rate"]["parameterType"] == "NUMBER_DOUBLE"
    assert params["data_uri"]["defaultValue"] == ""
    for name, spec in params.items():
        assert "defaultValue" in spec, name
        assert spec.get("description"), f"parameter {name} has no description for the UI"
    artifact_outputs = flights_spec["root"]["outputDefinitions"]["artifacts"]
    assert artifact_outputs["classification"]["artifactType"]["schemaTitle"] == (
        "system.ClassificationMetrics"
    )
    assert artifact_outputs["report"]["artifactType"]["schemaTitle"] == "system.Markdown"
    assert artifact_outputs["model"]["artifactType"]["schemaTitle"] == "system.Model"


def test_every_executor_uses_the_versioned_image_and_installs_nothing(flights_spec):
    executors = flights_spec["deploymentSpec"]["executors"]
    assert executors
    for name, executor in executors.items():
        container = executor["container"]
        assert container["image"] == images.image_for("launcher"), name
        assert container["image"].endswith(":" + __version__)
        script = " ".join(container["command"] + container.get("args", []))
        assert "pip install" not in script, f"{name} installs packages at start"


def test_image_reference_follows_registry_override(monkeypatch):
    monkeypatch.setenv("KFSTACK_IMAGE_REGISTRY", "registry.example.com/ml/")
    assert images.image_for("spark") == f"registry.example.com/ml/kfstack-spark:{__version__}"
    with pytest.raises(ValueError, match="unknown image role"):
        images.image_for("nope")


def test_parse_params_types_values_from_the_pipeline_signature():
    func = load_pipeline("flights-training")
    args = parse_params(["workers=3", "learning_rate=0.01", "data_uri=/d", "epochs=2"], func)
    assert args == {"workers": 3, "learning_rate": 0.01, "data_uri": "/d", "epochs": 2}
    with pytest.raises(SystemExit, match="unknown parameter"):
        parse_params(["wokers=3"], func)
    with pytest.raises(SystemExit, match="workers='two'"):
        parse_params(["workers=two"], func)
    with pytest.raises(SystemExit, match="expected NAME=VALUE"):
        parse_params(["workers"], func)


def test_unknown_pipeline_name_is_rejected():
    with pytest.raises(KeyError, match="unknown pipeline"):
        load_pipeline("no-such-pipeline")
