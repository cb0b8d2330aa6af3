"""The diabetes project's page (``diabetes/pipeline.py``) over its code as the team wrote it: no
adapter between kfstack and an argv trainer with dash-style options, keyword-only locations, a
``--input/--output`` Spark step and a plain ``kserve.Model``.

By default the page renders: the cluster's objects carry the code's own option spelling. Marked
slow, the whole pipeline runs embedded twice, as a team's first and second run would: the data
step, tuning over the page's search ranges, DDP training, the evaluation through the team's
server, the first deployment; then the canary, with the unchanged steps answered from the cache.
"""

from __future__ import annotations

import json
import pathlib

import pytest
import yaml

from kfstack.app import cli
from tests.frameworks import needs_torch

PIPELINE = "diabetes.pipeline:diabetes_training"


def _objects(folder: pathlib.Path) -> dict[str, dict]:
    """Rendered objects by kind (the last of a kind when there are several)."""
    found = {}
    for path in sorted(folder.glob("*.yaml")):
        document = yaml.safe_load(path.read_text())
        found[document["kind"]] = document
    return found


def _strings(value) -> list[str]:
    """Every string inside a rendered object, depth first."""
    if isinstance(value, str):
        return [value]
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
    return [text for item in items for text in _strings(item)]


def test_the_page_renders_the_code_as_it_is(diabetes_project, tmp_path, capsys):
    out = tmp_path / "objects"
    assert cli.main(["render", PIPELINE, "--out", str(out), "--param", "training_api=v1"]) == 0, (
        capsys.readouterr().err
    )
    objects = _objects(out)
    # The Spark step's own --input/--output, the locations left to the driver's environment.
    spark = objects["SparkApplication"]["spec"]
    assert spark["arguments"][-2:] == ["--input=$KFSTACK_INPUT_URI", "--output=$KFSTACK_OUTPUT_URI"]
    # Each tuning trial writes the trainer's dash-style options, the search's values in them.
    trial = _strings(objects["Experiment"]["spec"]["trialTemplate"]["trialSpec"])
    assert "--learning-rate=${trialParameters.learning_rate}" in trial
    assert "--hidden-units=${trialParameters.hidden_units}" in trial
    searched = {p["name"]: p["feasibleSpace"] for p in objects["Experiment"]["spec"]["parameters"]}
    assert searched["dropout"] == {"min": "0.0", "max": "0.3", "distribution": "uniform"}
    # The final training too, with the tuned values.
    master = objects["PyTorchJob"]["spec"]["pytorchReplicaSpecs"]["Master"]
    assert any(text.startswith("--learning-rate=") for text in _strings(master))


@pytest.mark.slow
@needs_torch
def test_two_embedded_runs_the_second_a_canary_from_the_cache(diabetes_project, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    summaries = []
    for run in ("first", "second"):
        summary = tmp_path / f"{run}.json"
        arguments = ["run", "--local", PIPELINE, "--pipeline-root", str(tmp_path / "runs")]
        assert cli.main([*arguments, "--summary-json", str(summary)]) == 0, run
        summaries.append(json.loads(summary.read_text()))
    first, second = summaries
    assert first["status"] == second["status"] == "SUCCEEDED"
    assert first["data"]["rows_read"] == 442 and first["data"]["rows_quarantined"] == 0
    assert first["tuning"]["trials_succeeded"] >= 1 and set(first["tuning"]["best_parameters"]) == {
        "hidden_units",
        "dropout",
        "learning_rate",
    }
    assert first["metrics"]["evaluation_metrics.rows"] > 0
    assert first["serving"]["decision"] == "first"
    # Nothing changed: the data step, tuning and training are answered from the first run.
    cached = {name for name, stage in second["stages"].items() if stage["cached_from"]}
    assert {"spark-job", "hyperparameter-tuning", "distributed-training"} <= cached
    # The deployment is never cached: the second model is analysed as a canary.
    assert second["serving"]["decision"] in ("promote", "rollback")
