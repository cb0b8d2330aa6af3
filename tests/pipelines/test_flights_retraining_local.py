"""flights-retraining on the embedded platform, run after run in one pipeline root (one registry),
on real flights -- both branches, the gate, and a reproduction of the promoted model.

1. Nothing in production: the first window trains, passes the gate, deploys first.
2. The window one week later, as a schedule asks for it (``window_days`` back from the run's
   time, with the lag that replays 2013): no drift (the calendar features are ignored; weather
   and schedule barely move in a week): nothing is trained or deployed.
3. The same window with a synthetic drift: drift, retraining, the challenger beats the champion
   on the new window, the canary is analysed and promoted.
4. Forced, with a challenger made worse on purpose (one epoch at a learning rate too small to
   learn): the gate keeps the champion; nothing is deployed.
5. ``kfstack reproduce`` of the promoted model: the same data, spec and metrics, bit for bit.

Whole runs, each a Spark job and (but for 2) a training: ``slow``. The steps' decisions are
tested fast with their components (tests/components/: production_model, data_drift, gate_model)
and in tests/monitoring.
"""

from __future__ import annotations

import datetime
import io
import json
import os

import pytest

from kfstack.app.local_run import run_pipeline_locally
from kfstack.app.reproduce import reproduce
from kfstack.app.summary import SUCCEEDED
from kfstack.lineage import Lineage
from kfstack.serving.registry import LocalRegistry
from kfstack.version import VERSION_ENV
from kfstack_examples.flights.feature_spec import JOB_REPORT_FILE

pytestmark = pytest.mark.slow

SERVING_NAME = "flights-delay"
COMMON = {
    "platform": "local",
    "sample_fraction": 0.2,
    "tune": False,
    "epochs": 2,
    "num_shards": 2,
    "canary_records": 1000,
}
FIRST_WINDOW = {"window_start": "2013-01-01", "window_end": "2013-06-30"}
WEEK_LATER = {"window_start": "2013-01-08", "window_end": "2013-07-07"}
TRAINING_STEPS = {
    "hyperparameter-tuning",
    "distributed-training",
    "model-evaluation",
    "gate-model",
    "model-deployment",
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The four runs in order, in one pipeline root; their summaries and the registry.

    Under an explicit pipeline version, as a released pipeline runs: reproduce refuses a model
    of uncommitted code, and the tree under test may have some."""
    root = str(tmp_path_factory.mktemp("retraining"))
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setenv(VERSION_ENV, "0.1.0+retraining-test")

    def run(**arguments):
        summary = run_pipeline_locally(
            "flights-retraining", {**COMMON, **arguments}, pipeline_root=root, console_stream=io.StringIO()
        )
        assert summary.status == SUCCEEDED, summary.error
        return summary

    # 2013-01-08 .. 2013-07-07 as a window relative to today (the run's creation time).
    lag = (datetime.datetime.now(datetime.UTC).date() - datetime.date(2013, 7, 8)).days
    summaries = [
        run(**FIRST_WINDOW),
        run(window_days=181, window_lag_days=lag),
        run(**WEEK_LATER, synthetic_drift=0.3),
        run(**WEEK_LATER, synthetic_drift=0.3, force=True, learning_rate=1e-7, epochs=1),
    ]
    yield summaries, LocalRegistry(os.path.join(root, "registry"), SERVING_NAME), root
    monkeypatch.undo()


def test_the_first_window_trains_and_deploys_first(runs):
    (first, *_), registry, _ = runs
    assert first.drift["decision"] == "retrain" and first.drift["drifted"] is None
    assert first.gate["decision"] == "challenger" and first.gate["champion"] is None
    assert first.serving["decision"] == "first"
    assert registry.history()[0]["event"] == "first"


def test_a_week_later_nothing_drifted_and_nothing_is_trained_or_deployed(runs):
    (first, later, *_), _, _ = runs
    assert later.drift["decision"] == "skip" and later.drift["drifted"] is False, later.drift
    assert later.drift["champion_version"] == first.serving["model_version"]
    # The calendar is measured but ignored; nothing else moved past the line.
    assert later.drift["ignored_features"] == ["month", "day_of_year"]
    assert later.drift["drifted_features"] == [] and later.drift["label_drifted"] is False
    assert not TRAINING_STEPS & set(later.stages)
    assert later.gate is None and later.serving is None
    # The relative window the run resolved (a run that straddles midnight UTC: a day later).
    with open(os.path.join(later.artifacts["output"], JOB_REPORT_FILE)) as f:
        window = json.load(f)["window"]
    assert (window["start"], window["end"]) in {("2013-01-08", "2013-07-07"), ("2013-01-09", "2013-07-08")}


def test_a_drifted_window_retrains_and_a_better_model_is_promoted(runs):
    (first, _, drifted, *_), registry, _ = runs
    assert drifted.drift["decision"] == "retrain"
    assert {"distance", "scheduled_minutes"} <= set(drifted.drift["drifted_features"])
    assert drifted.drift["label_drifted"] is True
    gate = drifted.gate
    assert gate["decision"] == "challenger" and gate["champion_version"] == first.serving["model_version"]
    assert gate["challenger"]["auc"] > gate["champion"]["auc"]
    assert drifted.serving["decision"] == "promote", drifted.serving
    assert drifted.serving["previous_version"] == first.serving["model_version"]
    events = [e["event"] for e in registry.history()]
    assert events[:2] == ["first", "promoted"]


def test_a_worse_challenger_is_never_promoted(runs):
    (*_, drifted, worse), registry, _ = runs
    assert worse.drift["decision"] == "retrain" and worse.drift["forced"] is True
    assert worse.gate["decision"] == "champion", worse.gate
    assert worse.gate["challenger"]["auc"] < worse.gate["champion"]["auc"]
    assert "model-deployment" not in worse.stages and worse.serving is None
    production = registry.production()
    assert production is not None and production.version == drifted.serving["model_version"]
    assert len(registry.history()) == 2  # first, promoted: nothing since


def test_the_promoted_model_reproduces_bit_for_bit(runs, tmp_path):
    _, registry, _ = runs
    production = registry.production()
    assert production is not None
    recorded = Lineage.load(production.model_dir)
    assert recorded.parameters["synthetic_drift"] == 0.3 and recorded.data["window"]["start"] == "2013-01-08"
    result = reproduce(
        production.model_dir,
        str(tmp_path),
        pipeline="flights-training",
        tolerance=0.0,
        console_stream=io.StringIO(),
    )
    assert result.matches, result.render()
