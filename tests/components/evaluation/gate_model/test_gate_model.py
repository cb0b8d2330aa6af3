"""The generic champion/challenger gate on a team's own models: two scikit-learn digit
classifiers scored through the format's stand-in on the same labelled rows, the better one let
through, a worse or merely equal one kept out by the margin; the component under kfp.local with
a production-model artifact that found nothing."""

from __future__ import annotations

import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kfstack.components.evaluation.gate_model.core import gate_models
from kfstack.monitoring.gate import KEEP, PASS, GateRule
from kfstack.serving.production import RECORD_FILE, FoundModel
from tests.kfp_local import run_pipeline
from tests.serving import standard_models


def champion_dir(path, model_dir: str | None, version: str = "run-1") -> str:
    """What the production-model step leaves: the model's files and its record (comparable), or
    only the record (nothing in production)."""
    os.makedirs(path)
    if model_dir:
        for name in os.listdir(model_dir):
            os.link(os.path.join(model_dir, name), os.path.join(path, name))
    found = FoundModel(True, version, model_dir, True) if model_dir else FoundModel(found=False)
    with open(os.path.join(path, RECORD_FILE), "w") as f:
        json.dump(found.metadata(), f)
    return str(path)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """A good digit classifier, a weak one (a few rows, one pass), and labelled rows neither saw."""
    import joblib
    from sklearn.linear_model import LogisticRegression

    root = tmp_path_factory.mktemp("gate")
    standard_models.sklearn_digits(str(root / "good"))
    x, y = standard_models.digits()
    weak = LogisticRegression(max_iter=1).fit(x[:30], y[:30])
    os.makedirs(root / "weak")
    joblib.dump(weak, root / "weak" / "model.joblib")
    rows = standard_models.DIGITS_TEST_ROWS
    pq.write_table(
        pa.table({**{f"p{i}": x[-rows:, i] for i in range(64)}, "digit": y[-rows:]}), root / "holdout.parquet"
    )
    return root


def gate(models, challenger: str, champion: str, rule: GateRule):
    common = {"dataset_uri": str(models / "holdout.parquet"), "task": "multiclass", "label_column": "digit"}
    return gate_models(
        challenger_dir=str(models / challenger),
        champion_dir=champion,
        rule=rule,
        model_format="sklearn",
        **common,
    )


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_a_better_challenger_passes_a_worse_one_does_not(models, tmp_path):
    weak = champion_dir(tmp_path / "weak-in-production", str(models / "weak"))
    better = gate(models, "good", weak, GateRule("accuracy", 0.05))
    assert better.decision == PASS
    assert better.challenger["accuracy"] > 0.9 > better.champion["accuracy"]
    good = champion_dir(tmp_path / "good-in-production", str(models / "good"))
    assert gate(models, "weak", good, GateRule("macro_f1")).decision == KEEP
    # As good as production: through at margin 0, not above it.
    same = gate(models, "good", good, GateRule("accuracy", 0.0))
    assert same.decision == PASS and same.challenger == same.champion
    assert gate(models, "good", good, GateRule("accuracy", 0.01)).decision == KEEP
    # Lower is better for a loss.
    assert gate(models, "weak", good, GateRule("log_loss")).decision == KEEP


def test_with_nothing_in_production_the_challenger_passes(models, tmp_path):
    report = gate(models, "good", champion_dir(tmp_path / "none", None), GateRule("accuracy", 0.5))
    assert report.decision == PASS and report.champion is None and "nothing in production" in report.reason


# kfp.local warns that the component's image is not plain Python; this process has its packages.
@pytest.mark.filterwarnings("ignore:You may be attemping to run a task:RuntimeWarning")
def test_the_component_runs_under_kfp_local(models, tmp_path):
    from kfp import dsl

    from kfstack.components.evaluation.gate_model.component import gate_model

    nothing = champion_dir(tmp_path / "nothing", None)

    @dsl.pipeline(name="team-gate")
    def team_gate():
        challenger = dsl.importer(
            artifact_uri=str(models / "good"), artifact_class=dsl.Model, metadata={"model_format": "sklearn"}
        )
        champion = dsl.importer(artifact_uri=nothing, artifact_class=dsl.Model)
        data = dsl.importer(artifact_uri=str(models / "holdout.parquet"), artifact_class=dsl.Dataset)
        gate_model(
            challenger=challenger.output,
            champion=champion.output,
            dataset=data.output,
            task="multiclass",
            label_column="digit",
        )

    run = run_pipeline(team_gate, tmp_path / "root")
    outputs = json.loads((run / "gate-model" / "executor_output.json").read_text())
    assert outputs["parameterValues"]["Output"] == PASS
    logged = outputs["artifacts"]["gate_metrics"]["artifacts"][0]["metadata"]
    # The task's quality metric decides when none is named: accuracy for a multiclass task.
    assert logged["passed"] == 1 and logged["challenger.accuracy"] > 0.9
    assert np.isfinite(logged["challenger.macro_f1"])
