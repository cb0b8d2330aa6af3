"""Generic drift: any Parquet dataset profiled by declared columns and compared with a reference
profile (or its data), PSI per column and the label rate; the component under kfp.local."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kfstack.components.monitoring.data_drift.core import DriftData, check_drift, decide_retraining
from kfstack.errors import InvalidParameterError
from kfstack.monitoring.drift import DriftThresholds
from kfstack.monitoring.profiling import profile_dataset, write_profile
from kfstack.serving.production import RECORD_FILE, FoundModel
from tests.kfp_local import run_pipeline


def write(path, rows: int, seed: int, shift: float = 0.0, new_colour: bool = False, positive: float = 0.3):
    rng = np.random.default_rng(seed)
    colours = np.where(rng.random(rows) < 0.6, "red", "blue").astype(object)
    if new_colour:
        colours[: rows // 3] = "green"
    amount = rng.normal(10 + shift, 2, rows)
    amount[:5] = np.nan  # a few missing values
    pq.write_table(
        pa.table(
            {"amount": amount, "colour": colours, "label": (rng.random(rows) < positive).astype(np.int64)}
        ),
        path,
    )
    return str(path)


def test_a_profile_holds_histograms_top_values_and_the_label_rate(tmp_path):
    profile = profile_dataset(write(tmp_path / "a.parquet", 1000, 0), ["amount"], ["colour"], "label")
    amount = profile["numeric"]["amount"]
    assert amount["count"] == 995 and amount["missing_fraction"] == pytest.approx(0.005)
    assert sum(amount["histogram"]["counts"]) == 995 and len(amount["histogram"]["edges"]) == 11
    assert set(profile["categorical"]["colour"]["top_values"]) == {"red", "blue"}
    assert profile["splits"]["train"]["label_rate"] == pytest.approx(0.3, abs=0.05)
    # Binned on another profile's edges, values beyond them count in the end bins.
    shifted = profile_dataset(
        write(tmp_path / "b.parquet", 1000, 1, shift=50), ["amount"], [], reference=profile
    )
    assert shifted["numeric"]["amount"]["histogram"]["edges"] == amount["histogram"]["edges"]
    assert shifted["numeric"]["amount"]["histogram"]["counts"][-1] == 995


@pytest.mark.parametrize(
    ("current", "drifted", "columns"),
    [
        ({"seed": 1}, False, []),
        ({"seed": 1, "shift": 3.0}, True, ["amount"]),
        ({"seed": 1, "new_colour": True}, True, ["colour"]),
        ({"seed": 1, "positive": 0.6}, True, []),  # the label rate alone
    ],
)
def test_drift_by_column_and_label_against_a_reference_dataset(tmp_path, current, drifted, columns):
    reference = write(tmp_path / "reference.parquet", 4000, 0)
    new = write(tmp_path / "current.parquet", 4000, **current)
    report, _ = check_drift(DriftData(reference, new, ["amount"], ["colour"], "label"), DriftThresholds())
    assert report.drifted is drifted and report.drifted_features == columns


def test_a_reference_profile_is_used_as_it_is(tmp_path):
    reference = profile_dataset(
        write(tmp_path / "reference.parquet", 2000, 0), ["amount"], ["colour"], "label"
    )
    write_profile(reference, str(tmp_path / "profile"))
    current_data = write(tmp_path / "current.parquet", 2000, 2)
    data = DriftData(str(tmp_path / "profile"), current_data, ["amount"], ["colour"], "label")
    report, current = check_drift(data, DriftThresholds())
    assert not report.drifted
    assert (
        current["numeric"]["amount"]["histogram"]["edges"]
        == reference["numeric"]["amount"]["histogram"]["edges"]
    )


def decide(reference, current, force=False, **overrides):
    columns = {"numeric": ["amount"], "categorical": ["colour"], "label": "label", **overrides}
    return decide_retraining(DriftData(str(reference), str(current), **columns), DriftThresholds(), force)


def production_model(directory, found: FoundModel, profile: dict | None = None) -> str:
    """A production_model step's artifact: what it found, and the model's training profile."""
    directory.mkdir()
    (directory / RECORD_FILE).write_text(json.dumps(found.metadata()))
    if profile is not None:
        write_profile(profile, str(directory))
    return str(directory)


def test_against_production_the_decision_names_its_version_and_force_retrains(tmp_path):
    reference = profile_dataset(write(tmp_path / "old.parquet", 2000, 0), ["amount"], ["colour"], "label")
    champion = production_model(tmp_path / "champion", FoundModel(True, "run-1", comparable=True), reference)
    same = write(tmp_path / "same.parquet", 2000, 2)
    kept = decide(champion, same)
    assert not kept.retrain and "run-1 stays in production" in kept.reason
    assert kept.metrics()["retrain"] == 0.0 and kept.summary()["champion_version"] == "run-1"
    forced = decide(champion, same, force=True)
    assert forced.retrain and forced.summary()["forced"] is True and "force=true" in forced.reason
    moved = decide(champion, write(tmp_path / "moved.parquet", 2000, 2, shift=3.0))
    assert moved.retrain and "drifted from run-1's training data: amount" in moved.reason


def test_nothing_comparable_in_production_retrains_without_comparing(tmp_path):
    current = write(tmp_path / "new.parquet", 500, 1)
    nothing = production_model(tmp_path / "nothing", FoundModel(False))
    decision = decide(nothing, current)
    assert decision.retrain and decision.report is None and "nothing in production" in decision.reason
    other = production_model(tmp_path / "other", FoundModel(True, "handmade", comparable=False))
    decision = decide(other, current)
    assert decision.retrain and decision.report is None and "handmade" in decision.reason
    # Comparable by the files the run named, but it kept no training profile: the same.
    unprofiled = production_model(tmp_path / "unprofiled", FoundModel(True, "run-0", comparable=True))
    decision = decide(unprofiled, current)
    assert decision.retrain and decision.report is None and "no training profile" in decision.reason


def test_a_profile_the_data_step_wrote_is_compared_instead_of_profiling_here(tmp_path):
    reference = profile_dataset(write(tmp_path / "old.parquet", 2000, 0), ["amount"], ["colour"], "label")
    write_profile(reference, str(tmp_path / "reference"))
    # The data step profiled its data on the reference's edges itself (the flights Spark job does).
    data = tmp_path / "data"
    data.mkdir()
    shifted = profile_dataset(
        write(data / "part-0.parquet", 2000, 3, shift=3.0), ["amount"], [], "label", reference=reference
    )
    (data / "window_profile.json").write_text(json.dumps(shifted))
    decision = decide(
        tmp_path / "reference", data, numeric=[], categorical=[], current_profile_file="window_profile.json"
    )
    assert decision.retrain and decision.report is not None
    assert decision.report.drifted_features == ["amount"] and decision.report.removed_features == ("colour",)
    with pytest.raises(InvalidParameterError, match=r"has no absent\.json: its data step did not profile it"):
        decide(tmp_path / "reference", data, current_profile_file="absent.json")


@pytest.mark.parametrize(
    ("numeric", "categorical", "message"),
    [
        (["weight"], [], "has no column weight"),
        ([], [], "needs numeric_columns or categorical_columns"),
        (["colour"], [], "colour is not numeric"),
    ],
)
def test_declared_columns_are_checked(tmp_path, numeric, categorical, message):
    with pytest.raises(InvalidParameterError, match=message):
        profile_dataset(write(tmp_path / "a.parquet", 100, 0), numeric, categorical)


# kfp.local warns that the component's image is not plain Python; this process has its packages.
@pytest.mark.filterwarnings("ignore:You may be attemping to run a task:RuntimeWarning")
def test_the_component_runs_under_kfp_local(tmp_path):
    from kfp import dsl

    from kfstack.components.monitoring.data_drift.component import data_drift

    reference = write(tmp_path / "reference.parquet", 2000, 0)
    current = write(tmp_path / "current.parquet", 2000, 1, shift=3.0)

    @dsl.pipeline(name="team-drift")
    def team_drift():
        old = dsl.importer(artifact_uri=reference, artifact_class=dsl.Artifact)
        new = dsl.importer(artifact_uri=current, artifact_class=dsl.Dataset)
        data_drift(
            reference=old.output,
            current=new.output,
            numeric_columns=["amount"],
            categorical_columns=["colour"],
            label_column="label",
        )

    run = run_pipeline(team_drift, tmp_path / "root")
    step = run / "data-drift"
    assert json.loads((step / "current_profile" / "profile.json").read_text())["rows"] == 2000
    assert "amount" in (step / "drift_report").read_text()
    outputs = json.loads((step / "executor_output.json").read_text())
    assert outputs["parameterValues"]["Output"] is True  # retrain
    report = outputs["artifacts"]["drift_report"]["artifacts"][0]["metadata"]
    assert report["decision"] == "retrain" and report["drifted_features"] == ["amount"]
