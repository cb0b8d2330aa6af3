"""Live drift in real model servers on loopback: the scikit-learn stand-in of a model directory
with a training profile (rows by position) and the flights predictor (the features its scorer
builds, by name). The gauges appear on ``/metrics`` once the window is full and not before, with
the values the window computes in-process from the same rows; a refused request is never
observed; a server that cannot watch says why (``--live_drift=on``: it refuses to start)."""

from __future__ import annotations

import json
import os
import subprocess

import httpx
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from prometheus_client.parser import text_string_to_metric_families

from kfstack.errors import InvalidParameterError
from kfstack.monitoring.drift import DriftThresholds
from kfstack.monitoring.live_drift import LiveDrift, read_reference
from kfstack.monitoring.profiling import profile_dataset, write_profile
from kfstack.serving.format_server import MODULE as FORMAT_SERVER
from kfstack.serving.format_server import command as format_server_command
from kfstack_examples.flights.features import CALENDAR_FEATURES
from kfstack_examples.flights.scoring import REQUEST_SCHEMA, FlightScorer
from tests.serving import standard_models
from tests.serving.conftest import Predictor, v2_inputs

WINDOW = 100
PIXELS = tuple(f"pixel_{i}" for i in range(64))


def none_dropped(model_name: str) -> dict[str, dict[tuple, float]]:
    """The dropped-rows counter of a window whose every observed batch was binned."""
    return {"kfstack_predictor_drift_rows_dropped_total": {(("model_name", model_name),): 0.0}}


def drift_samples(server: Predictor) -> dict[str, dict[tuple, float]]:
    """The live-drift series on the server's ``/metrics``: name -> labels -> value."""
    text = httpx.get(f"{server.url}/metrics", timeout=10).text
    found: dict[str, dict[tuple, float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.startswith("kfstack_predictor_drift_"):
                found.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return found


@pytest.fixture(scope="module")
def digits_dir(tmp_path_factory) -> str:
    """The scikit-learn digits model (fitted on a matrix: it records no feature names) beside
    the profile of its training pixels, which lists them in order (``feature_order``)."""
    root = tmp_path_factory.mktemp("digits-drift")
    model_dir = str(root / "model")
    standard_models.sklearn_digits(model_dir)
    x, _ = standard_models.digits()
    train = x[: -standard_models.DIGITS_TEST_ROWS]
    pq.write_table(
        pa.table({name: train[:, i] for i, name in enumerate(PIXELS)}), str(root / "train.parquet")
    )
    profile = profile_dataset(str(root / "train.parquet"), PIXELS, ())
    write_profile({**profile, "feature_order": list(PIXELS)}, model_dir)
    return model_dir


@pytest.fixture(scope="module")
def digits_server(digits_dir, tmp_path_factory):
    server = Predictor(
        digits_dir,
        str(tmp_path_factory.mktemp("digits-drift-server")),
        "--model_format=sklearn",
        f"--live_drift_window_rows={WINDOW}",
        f"--live_drift_request_rows={WINDOW}",  # every row a test sends enters the window
        "--live_drift=on",
        name="digits",
        module=FORMAT_SERVER,
        service="digits",
    )
    yield server
    server.stop()


def test_the_stand_in_exports_the_window_once_full_and_never_a_refused_row(digits_server, digits_dir):
    x, _ = standard_models.digits()
    held_out = x[-standard_models.DIGITS_TEST_ROWS :]
    assert drift_samples(digits_server) == {
        "kfstack_predictor_drift_window_rows": {(("model_name", "digits"),): 0.0},
        **none_dropped("digits"),
    }
    assert digits_server.v1(held_out[:60].tolist()).status_code == 200
    # Refused: the wrong width, text for a number. Neither is observed.
    assert digits_server.v1([[1.0, 2.0]]).status_code == 400
    assert digits_server.v1([["a"] * 64]).status_code == 400
    samples = drift_samples(digits_server)
    assert samples == {
        "kfstack_predictor_drift_window_rows": {(("model_name", "digits"),): 60.0},
        **none_dropped("digits"),
    }
    # V2, one matrix input by position.
    v2 = {"name": "input-0", "shape": [50, 64], "datatype": "FP64", "data": held_out[60:110].tolist()}
    assert digits_server.v2([v2]).status_code == 200
    samples = drift_samples(digits_server)
    assert samples["kfstack_predictor_drift_window_rows"] == {(("model_name", "digits"),): float(WINDOW)}
    psi = {dict(labels)["feature"]: value for labels, value in samples["kfstack_predictor_drift_psi"].items()}
    assert set(psi) == set(PIXELS)
    # The values the window computes from the same rows in the same order.
    reference = read_reference(digits_dir)
    assert reference is not None
    window = LiveDrift(reference, WINDOW, columns=PIXELS, request_rows=WINDOW)
    window.observe(held_out[:60])
    window.observe(held_out[60:110])
    report = window.report()
    assert report is not None
    assert psi == pytest.approx(report.psi, rel=1e-9)
    (max_psi,) = samples["kfstack_predictor_drift_max_psi"].values()
    assert max_psi == pytest.approx(report.max_psi, rel=1e-9)


def test_a_drifted_window_crosses_the_line(digits_server):
    x, _ = standard_models.digits()
    # Digits drawn bolder: every ink pixel at full strength.
    bolder = np.where(x[-WINDOW:] > 0, 16.0, 0.0)
    assert digits_server.v1(bolder.tolist()).status_code == 200
    (max_psi,) = drift_samples(digits_server)["kfstack_predictor_drift_max_psi"].values()
    assert max_psi > 0.2


def test_live_drift_on_refuses_to_start_without_a_profile(tmp_path):
    standard_models.sklearn_digits(str(tmp_path))
    args = format_server_command(str(tmp_path), "m", 0, "sklearn", "", "--live_drift=on")
    done = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"--live_drift=on: no profile.json in the model directory {tmp_path}" in done.stderr


def test_auto_serves_a_model_that_cannot_be_mapped_and_says_why(digits_dir, tmp_path):
    """A profile without ``feature_order`` beside a model fitted on a matrix: served, unwatched."""
    standard_models.sklearn_digits(str(tmp_path / "model"))
    profile = read_profile_without_order(digits_dir)
    write_profile(profile, str(tmp_path / "model"))
    server = Predictor(
        str(tmp_path / "model"),
        str(tmp_path / "run"),
        "--model_format=sklearn",
        name="digits",
        module=FORMAT_SERVER,
        service="digits",
    )
    try:
        assert server.v1([[0.0] * 64]).status_code == 200
        assert drift_samples(server) == {}
        with open(server.service.log_path, encoding="utf-8") as f:
            log = f.read()
        assert "live drift off: the model takes rows by position and neither records" in log
    finally:
        server.stop()


def read_profile_without_order(model_dir: str) -> dict:
    with open(os.path.join(model_dir, "profile.json"), encoding="utf-8") as f:
        profile = json.load(f)
    profile.pop("feature_order")
    return profile


def test_the_flights_predictor_watches_the_features_its_scorer_builds(trained, raw_records, tmp_path):
    window = 120
    every_row = f"--live_drift_request_rows={window}"  # each request's rows all enter the window
    server = Predictor(trained["model"], str(tmp_path), f"--live_drift_window_rows={window}", every_row)
    try:
        # A small request (its lists handed over) and a large one (its numeric features as the
        # arrays converted for the model): the same window as the lists of both, in-process.
        first, second = raw_records[:30], raw_records[30:130]
        assert server.v1(first).status_code == 200
        assert server.v1([{**first[0], "month": 13}]).status_code == 400  # refused: not observed
        samples = drift_samples(server)
        assert samples == {
            "kfstack_predictor_drift_window_rows": {(("model_name", server.name),): 30.0},
            **none_dropped(server.name),
        }
        assert server.v2(v2_inputs(second)).status_code == 200
        samples = drift_samples(server)
        psi = {dict(k)["feature"]: v for k, v in samples["kfstack_predictor_drift_psi"].items()}
        # The same rows through the scorer's feature path, in-process.
        reference = read_reference(trained["model"])
        assert reference is not None and set(psi) == set(reference.names)
        expected = LiveDrift(
            reference, window, DriftThresholds(ignored_features=CALENDAR_FEATURES), request_rows=window
        )
        scorer = FlightScorer(trained["model"])
        for batch in (first, second):
            expected.observe(scorer.raw_columns(REQUEST_SCHEMA.from_v1({"instances": batch})))
        report = expected.report()
        assert report is not None
        assert psi == pytest.approx(report.psi, rel=1e-9)
        (max_psi,) = samples["kfstack_predictor_drift_max_psi"].values()
        # The calendar features are measured but left out of the max, as the drift check does.
        assert max_psi == pytest.approx(report.max_psi, rel=1e-9)
        assert max_psi == max(v for k, v in psi.items() if k not in CALENDAR_FEATURES)
    finally:
        server.stop()


def test_a_capped_window_samples_a_large_requests_arrays_as_it_would_their_lists(trained, raw_records):
    """Above the per-request cap, the numeric features a large request hands over as arrays (the
    flights predictor's, converted for the model) are sampled into the window as the same rows'
    lists would be: the same rows, binned alike."""
    reference = read_reference(trained["model"])
    assert reference is not None
    scorer = FlightScorer(trained["model"])
    columns = scorer.raw_columns(REQUEST_SCHEMA.from_v1({"instances": raw_records[:100]}))
    raw_numeric = scorer.spec.raw_numeric(columns)
    arrays = {**columns, **{f.name: raw_numeric[:, j] for j, f in enumerate(scorer.spec.numeric)}}
    assert isinstance(arrays[scorer.spec.numeric[0].name], np.ndarray)
    as_arrays, as_lists = (LiveDrift(reference, 40, request_rows=20, seed=7) for _ in range(2))
    for _ in range(2):
        as_arrays.observe(arrays)
        as_lists.observe(columns)
    assert as_arrays.sampled_rows == as_lists.sampled_rows == 160
    assert as_arrays.rows == as_lists.rows == 40
    assert as_arrays.counts() == as_lists.counts()
    assert as_arrays.dropped_rows == as_lists.dropped_rows == 0


def test_without_the_flag_a_models_own_ignored_features_apply():
    import argparse

    from kfstack.serving.model_server import add_live_drift_arguments, live_drift_settings

    parser = argparse.ArgumentParser()
    add_live_drift_arguments(parser)

    class Calendar:
        drift_ignored_features = CALENDAR_FEATURES

    assert live_drift_settings(parser.parse_args([]), Calendar()).ignored_features == CALENDAR_FEATURES
    assert live_drift_settings(parser.parse_args([]), object()).ignored_features == ()
    given = parser.parse_args(["--live_drift_ignore_features=temp, dewp"])
    assert live_drift_settings(given, Calendar()).ignored_features == ("temp", "dewp")
    assert (
        live_drift_settings(parser.parse_args(["--live_drift_ignore_features="]), Calendar()).ignored_features
        == ()
    )
    with pytest.raises(InvalidParameterError, match="window_rows"):
        live_drift_settings(parser.parse_args(["--live_drift_window_rows=0"]), Calendar())
