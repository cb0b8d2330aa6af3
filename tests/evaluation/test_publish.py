"""The component as KFP runs it: executor input in, artifacts and executor output out."""

from __future__ import annotations

import json
import pathlib
import re
import xml.etree.ElementTree as ET

import pytest
from kfp.dsl import executor as kfp_executor
from kfp.dsl.types import artifact_types

from kfstack.components.evaluation.evaluate_model.component import evaluate_model as component
from kfstack.components.evaluation.evaluate_model.core import evaluate_model
from kfstack.training.metrics import UNDEFINED

SVG = "{http://www.w3.org/2000/svg}"
OUTPUTS = {
    "test_metrics": "system.Metrics",
    "classification": "system.ClassificationMetrics",
    "report": "system.Markdown",
    "charts": "system.HTML",
}


def run_component(model: str, features: str, threshold: float, root: pathlib.Path) -> dict:
    """Runs the component function through kfp's executor; the executor output's artifacts."""

    def artifact(name: str, schema_title: str, uri: str) -> dict:
        return {
            "artifacts": [{"name": name, "type": {"schemaTitle": schema_title}, "uri": uri, "metadata": {}}]
        }

    executor_input = {
        "inputs": {
            "parameterValues": {"threshold": threshold},
            "artifacts": {
                "model": artifact("model", "system.Model", model),
                "features": artifact("features", "system.Dataset", features),
            },
        },
        "outputs": {
            "artifacts": {name: artifact(name, kind, str(root / name)) for name, kind in OUTPUTS.items()},
            "outputFile": str(root / "executor_output.json"),
        },
    }
    kfp_executor.Executor(executor_input, component).execute()
    output = json.loads((root / "executor_output.json").read_text(encoding="utf-8"))
    return {name: value["artifacts"][0] for name, value in output["artifacts"].items()}


@pytest.fixture(autouse=True)
def keep_kfp_task_root(monkeypatch):
    # The executor points this module global at its output folder; give it back afterwards.
    monkeypatch.setattr(artifact_types, "CONTAINER_TASK_ROOT", artifact_types.CONTAINER_TASK_ROOT)


def test_every_output_is_written(trained, tmp_path):
    model, features = trained
    artifacts = run_component(model, features, 0.5, tmp_path)
    assert set(artifacts) == set(OUTPUTS)
    expected = evaluate_model(model, features, threshold=0.5)
    assert artifacts["test_metrics"]["metadata"] == pytest.approx(expected.metrics)
    assert all(isinstance(value, float) for value in artifacts["test_metrics"]["metadata"].values())
    assert (
        artifacts["classification"]["metadata"]["confusionMatrix"]["rows"][0]["row"]
        == (expected.confusion_matrix[0])
    )
    assert (tmp_path / "report").read_text(encoding="utf-8") == expected.markdown

    page = (tmp_path / "charts").read_text(encoding="utf-8")
    roc, confusion = (ET.fromstring(block) for block in re.findall(r"<svg\b.*?</svg>", page, re.DOTALL))
    assert f"ROC curve, AUC {expected.metrics['auc']:.4f}" in page
    (curve,) = [line for line in roc.iter(f"{SVG}polyline") if line.get("class") == "curve"]
    assert len(curve.get("points", "").split()) == len(expected.roc_fpr)
    counts = [text.text for text in confusion.iter(f"{SVG}text") if text.get("class") == "count"]
    assert counts == [f"{count:,}" for row in expected.confusion_matrix for count in row]
    assert "predicted delayed at probability ≥ 0.5" in page


def test_undefined_metrics_are_recorded_as_undefined_not_zero(trained, on_time_only, tmp_path):
    model, _features = trained
    artifacts = run_component(model, on_time_only, 0.5, tmp_path)
    recorded = artifacts["test_metrics"]["metadata"]
    assert recorded["auc"] == recorded["recall"] == UNDEFINED == "undefined"
    assert recorded["precision"] == 0.0  # flights were predicted delayed, all wrongly
    assert recorded["positive_rate"] == 0.0 and recorded["test_rows"] == 750.0

    report = (tmp_path / "report").read_text(encoding="utf-8")
    assert "| AUC | undefined (no delayed flight in the test split) |" in report
    assert "| recall | undefined (no delayed flight in the test split) |" in report
    page = (tmp_path / "charts").read_text(encoding="utf-8")
    assert "ROC curve, AUC undefined (no delayed flight in the test split)" in page


def test_precision_undefined_when_nothing_is_predicted_delayed(trained, tmp_path):
    model, features = trained
    # No probability reaches 1.0 for this model: nothing is predicted delayed.
    artifacts = run_component(model, features, 1.0, tmp_path)
    recorded = artifacts["test_metrics"]["metadata"]
    assert recorded["predicted_positive_rate"] == 0.0
    assert recorded["precision"] == UNDEFINED
    assert isinstance(recorded["recall"], float) and isinstance(recorded["auc"], float)
    assert "| precision | undefined (no flight predicted delayed) |" in (tmp_path / "report").read_text(
        encoding="utf-8"
    )
