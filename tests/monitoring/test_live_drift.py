"""Live drift's window against the batch profile and drift check it mirrors: the same bins on the
same rows, the same PSI, nothing until the window is full, the oldest rows evicted."""

from __future__ import annotations

import logging
import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kfstack.errors import InvalidParameterError
from kfstack.monitoring.drift import (
    MISSING,
    DriftThresholds,
    categorical_psi,
    numeric_psi,
    population_stability,
)
from kfstack.monitoring.live_drift import (
    NO_LIVE_DRIFT,
    LiveDrift,
    LiveDriftSettings,
    Reference,
    category_key,
    read_reference,
)
from kfstack.monitoring.profiling import profile_dataset, write_profile

NUMERIC = ("distance", "delay")
CATEGORICAL = ("carrier",)
CARRIERS = ("AA", "B6", "DL", "UA", "WN")


# A request's rows all enter the window: the tests of the binning itself.
NO_CAP = 10**9


def rows(seed: int, n: int, shift: float = 0.0, carriers: tuple[str, ...] = CARRIERS) -> dict[str, list]:
    """``n`` rows of two numeric features (some missing) and a categorical one (some None)."""
    rng = np.random.default_rng(seed)
    distance = rng.normal(1000 + shift * 400, 300, n)
    delay = rng.exponential(20, n) + shift * 30
    delay[rng.random(n) < 0.1] = np.nan
    carrier = [None if rng.random() < 0.05 else str(c) for c in rng.choice(carriers, n)]
    return {"distance": distance.tolist(), "delay": delay.tolist(), "carrier": carrier}


def profile_of(columns: dict[str, list], path, reference=None) -> dict:
    pq.write_table(pa.table(columns), str(path))
    return profile_dataset(str(path), NUMERIC, CATEGORICAL, reference=reference)


@pytest.fixture
def reference_profile(tmp_path) -> dict:
    return profile_of(rows(0, 5000), tmp_path / "reference.parquet")


def window_of(reference_profile, size, **kwargs) -> LiveDrift:
    # The binning's own tests: every row of a batch enters (the per-request cap has its own test).
    kwargs.setdefault("request_rows", NO_CAP)
    return LiveDrift(Reference(reference_profile), size, **kwargs)


def test_the_window_bins_rows_as_the_batch_profile_does(tmp_path, reference_profile):
    # Shifted rows: many beyond the reference's edges, in its end bins.
    new = rows(1, 3000, shift=1.0)
    current = profile_of(new, tmp_path / "current.parquet", reference=reference_profile)
    window = window_of(reference_profile, 3000)
    window.observe(new)
    counts = window.counts()
    for name in NUMERIC:
        entry = current["numeric"][name]
        missing = round(entry["missing_fraction"] * 3000)
        assert counts[name] == [missing, *entry["histogram"]["counts"]]
    top_edge = reference_profile["numeric"]["distance"]["histogram"]["edges"][-1]
    assert sum(d > top_edge for d in new["distance"]) > 50  # binned in the last bin, as the batch's
    top = current["categorical"]["carrier"]["top_values"]
    listed = Reference(reference_profile).features[-1].values
    assert set(top) == set(listed)  # the profile lists every value: the bins compare one to one
    assert counts["carrier"] == [round(top[v] * 3000) for v in listed] + [0]


def test_the_window_psi_is_the_batch_checks_psi_on_the_same_rows(tmp_path, reference_profile):
    new = rows(2, 2000, shift=0.5)
    current = profile_of(new, tmp_path / "current.parquet", reference=reference_profile)
    window = window_of(reference_profile, 2000)
    window.observe(new)
    report = window.report()
    assert report is not None
    for name in NUMERIC:
        expected = numeric_psi(name, reference_profile["numeric"][name], current["numeric"][name])
        assert report.psi[name] == pytest.approx(expected, rel=1e-12)
    carrier = categorical_psi(reference_profile["categorical"]["carrier"], current["categorical"]["carrier"])
    assert report.psi["carrier"] == pytest.approx(carrier, rel=1e-12)
    assert report.max_psi == max(report.psi.values()) > 0.2


def test_nothing_is_reported_until_the_window_is_full(reference_profile):
    window = window_of(reference_profile, 100)
    window.observe(rows(3, 99))
    assert window.rows == 99 and window.report() is None
    window.observe(rows(4, 1))
    assert window.rows == 100 and window.report() is not None


def test_the_oldest_rows_leave_the_window(reference_profile):
    """Batches of every size, one row to more than the window: the counts are always those of
    the last ``size`` rows alone."""
    size = 37
    window = window_of(reference_profile, size)
    seen: dict[str, list] = {name: [] for name in (*NUMERIC, *CATEGORICAL)}
    rng = np.random.default_rng(5)
    for step, batch_rows in enumerate([1, 5, 30, 2, 1, 36, 37, 50, 3, *rng.integers(1, 20, 20).tolist()]):
        batch = rows(100 + step, batch_rows, shift=step % 3)
        window.observe(batch)
        for name in seen:
            seen[name] += batch[name]
        fresh = window_of(reference_profile, size)
        fresh.observe({name: values[-size:] for name, values in seen.items()})
        assert window.counts() == fresh.counts(), f"after batch {step}"
        assert window.rows == min(size, len(seen["carrier"]))


def test_a_matrix_by_position_bins_as_the_same_rows_by_name(reference_profile):
    batch = rows(6, 500)
    columns = ("carrier_code", "delay", "distance")  # another order, and a column not profiled
    matrix = np.column_stack([np.zeros(500), batch["delay"], batch["distance"]])
    no_carrier = {k: v for k, v in reference_profile.items() if k != "categorical"}
    by_position = LiveDrift(Reference(no_carrier), 500, columns=columns, request_rows=500)
    by_position.observe(matrix)
    by_name = LiveDrift(Reference(no_carrier), 500, request_rows=500)
    by_name.observe(batch)
    assert by_position.counts() == by_name.counts()
    with pytest.raises(InvalidParameterError, match="carrier are not among the model's columns"):
        LiveDrift(Reference(reference_profile), 10, columns=columns)
    with pytest.raises(InvalidParameterError, match="a matrix needs the model's columns"):
        by_name.observe(matrix)


def test_a_category_the_reference_never_listed_shows_in_other(reference_profile):
    window = window_of(reference_profile, 1000)
    window.observe(rows(7, 1000, carriers=("ZZ",)))
    assert window.counts()["carrier"][-1] > 900
    report = window.report()
    assert report is not None and report.psi["carrier"] > 5


def test_ignored_features_keep_their_psi_and_leave_the_max(reference_profile):
    shifted = {**rows(8, 2000), "distance": rows(9, 2000, shift=2.0)["distance"]}
    watched = window_of(reference_profile, 2000)
    ignoring = window_of(reference_profile, 2000, thresholds=DriftThresholds(ignored_features=("distance",)))
    for window in (watched, ignoring):
        window.observe(shifted)
    a, b = watched.report(), ignoring.report()
    assert a is not None and b is not None
    assert a.psi == b.psi and a.psi["distance"] > 1
    assert a.max_psi == a.psi["distance"]
    assert b.max_psi == max(b.psi["delay"], b.psi["carrier"]) < 0.2
    with pytest.raises(
        InvalidParameterError, match="live_drift_ignore_features names no profiled feature: x"
    ):
        window_of(reference_profile, 10, thresholds=DriftThresholds(ignored_features=("x",)))


def test_a_crossing_of_the_limit_is_logged_once_each_way(reference_profile, caplog):
    window = window_of(reference_profile, 500)
    caplog.set_level(logging.INFO, "kfstack.live_drift")
    window.observe(rows(10, 500, shift=2.0))
    window.report()
    window.report()
    window.observe(rows(11, 500))
    window.report()
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2
    assert messages[0].startswith("live drift: PSI above 0.2 over the last 500 rows: ")
    assert "distance" in messages[0] and "back under 0.2" in messages[1]


def test_uneven_edges_are_searched_and_missing_values_are_binned_first():
    profile = {
        "numeric": {
            "x": {
                "missing_fraction": 0.25,
                "histogram": {"edges": [0.0, 1.0, 10.0, 100.0], "counts": [1, 1, 1]},
            }
        }
    }
    window = LiveDrift(Reference(profile), 8, request_rows=8)
    window.observe({"x": [-5.0, 0.5, 1.0, 9.9, 10.0, 1e9, None, math.inf]})
    # The batch profile counts the infinities as missing (profile_dataset keeps finite values).
    assert window.counts()["x"] == [2, 2, 2, 2]
    report = window.report()
    assert report is not None
    assert report.psi["x"] == population_stability([0.25, 0.25, 0.25, 0.25], [0.25, 0.25, 0.25, 0.25]) == 0.0


def test_category_keys_are_the_profiles():
    assert category_key(None) == MISSING
    assert category_key("AA") == "AA"
    assert category_key(3.0) == "3"  # a whole float from a numeric matrix, profiled as an integer
    assert category_key(2.5) == "2.5"
    assert category_key(7) == "7"


def test_a_batch_without_a_profiled_feature_or_with_text_for_a_number_is_refused(reference_profile, caplog):
    """Binning refuses it, naming why. Observed (binned later, its request long answered), it is
    dropped, logged and counted, and none of its rows enters the window."""
    window = window_of(reference_profile, 10)
    lacking = {"distance": [1.0], "delay": [1.0]}
    text = {"distance": ["far"], "delay": [1.0], "carrier": ["AA"]}
    ragged = {"distance": [1.0, 2.0], "delay": [1.0], "carrier": ["AA", "B6"]}
    with pytest.raises(InvalidParameterError, match="the batch lacks the features carrier"):
        window.bins(lacking)
    with pytest.raises(InvalidParameterError, match="feature distance is not numeric"):
        window.bins(text)
    with pytest.raises(InvalidParameterError, match="different lengths: distance 2, delay 1, carrier 2"):
        window.bins(ragged)
    caplog.set_level(logging.WARNING, "kfstack.live_drift")
    for batch in (lacking, text, ragged):
        window.observe(batch)
    assert window.rows == 0 and window.dropped_rows == 4
    (warning,) = [r.getMessage() for r in caplog.records]
    assert warning == (
        "live drift: 3 observed batches (4 rows) dropped, not binnable; the first: "
        "live drift: the batch lacks the features carrier"
    )


def test_read_reference_from_a_model_directory(tmp_path, reference_profile):
    assert read_reference(str(tmp_path)) is None
    write_profile({**reference_profile, "feature_order": ["delay", "distance", "carrier"]}, str(tmp_path))
    reference = read_reference(str(tmp_path))
    assert reference is not None
    assert reference.names == ("distance", "delay", "carrier")
    assert reference.feature_order == ("delay", "distance", "carrier")
    (tmp_path / "profile.json").write_text("[1, 2]")
    with pytest.raises(InvalidParameterError, match="not a profile"):
        read_reference(str(tmp_path))
    with pytest.raises(InvalidParameterError, match="no numeric or categorical feature"):
        Reference({"rows": 3})


def test_settings_are_checked_and_name_the_flag():
    with pytest.raises(InvalidParameterError, match="window_rows"):
        LiveDriftSettings(window_rows=0)
    with pytest.raises(InvalidParameterError, match="mode"):
        LiveDriftSettings(mode="sometimes")
    settings = LiveDriftSettings(max_psi=0.3, ignored_features=("month",))
    assert settings.thresholds == DriftThresholds(max_psi=0.3, ignored_features=("month",))
    assert (
        LiveDriftSettings().window_rows == 2000 and LiveDriftSettings().max_psi == DriftThresholds().max_psi
    )


def test_no_live_drift_takes_anything_and_keeps_nothing():
    NO_LIVE_DRIFT.observe({"anything": [1]})
    assert NO_LIVE_DRIFT.rows == 0 and NO_LIVE_DRIFT.report() is None


def test_a_single_row_is_binned_as_in_a_batch():
    """One-row requests are gathered into columns before they are binned: the same bins, edge
    cases and all, as the same rows in one batch."""
    profile = {
        "numeric": {
            "even": {"histogram": {"edges": [0.0, 2.5, 5.0, 7.5, 10.0], "counts": [1, 1, 1, 1]}},
            "uneven": {"histogram": {"edges": [0.0, 1.0, 10.0, 100.0], "counts": [1, 1, 1]}},
        },
        "categorical": {"code": {"top_values": {"1": 0.5, "AA": 0.3, "(missing)": 0.1}}},
    }
    values = [-1e300, -1.0, 0.0, 2.5, 4.999, 7.5, 10.0, 1e300, None, math.nan, math.inf, -math.inf, True, 3]
    codes = ["AA", 1.0, 1, None, "ZZ", 2.5, "1", "AA", None, "x", 1.0, "AA", "1", 1]
    rows = {"even": values, "uneven": values[::-1], "code": codes}
    batch, single = (LiveDrift(Reference(profile), 100, request_rows=100) for _ in range(2))
    batch.observe(rows)
    for i in range(len(values)):
        single.observe({name: [column[i]] for name, column in rows.items()})
    assert single.counts() == batch.counts()
    assert batch.counts()["code"] == [6, 3, 2, 3]  # "1" (1.0, 1 or "1"), AA, missing, other


MATRIX_COLUMNS = ("delay", "carrier", "extra", "distance")


def random_batches(seed: int, count: int, window: int) -> list:
    """A request stream of every kind a server observes, in random order: one-row dicts (most),
    dicts of many rows, float, object and text matrices by position (``MATRIX_COLUMNS``), a
    single row as a 1-D array, a DataFrame, and now and then more rows than the window."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    batches: list = []
    for step in range(count):
        kind = rng.choice(
            ["one", "dict", "matrix", "object", "text", "row", "frame", "huge"],
            p=[0.5, 0.1, 0.1, 0.07, 0.08, 0.05, 0.05, 0.05],
        )
        n = {"one": 1, "row": 1, "huge": window + int(rng.integers(1, 40))}.get(
            kind, int(rng.integers(2, 30))
        )
        batch = rows(1000 + step, n, shift=float(rng.choice([0.0, 1.0])))
        if kind in ("one", "dict", "huge"):
            batches.append(batch)
        elif kind == "frame":
            batches.append(pd.DataFrame(batch))
        else:
            codes = [float(CARRIERS.index(c)) if c else math.nan for c in batch["carrier"]]
            carrier = batch["carrier"] if kind != "matrix" else codes
            matrix = np.array(
                list(zip(batch["delay"], carrier, [0] * n, batch["distance"], strict=True)),
                dtype={"matrix": np.float64, "text": str}.get(kind, object),
            )
            batches.append(matrix[0] if kind == "row" else matrix)
    return batches


@pytest.mark.parametrize("seed", [21, 22, 23])
def test_deferred_binning_gives_the_window_of_binning_each_batch_as_it_comes(reference_profile, seed):
    """The same stream into windows that bin each batch at once (``pending_rows=1``), every few
    rows, and at the default (the window's size): read at random moments, the same rows, counts
    and report, whatever pending batches each read finds."""
    size = 97
    reference = Reference(reference_profile)
    immediate, every_16, default = (
        LiveDrift(reference, size, columns=MATRIX_COLUMNS, pending_rows=pending, request_rows=NO_CAP)
        for pending in (1, 16, 512)
    )
    assert default.pending_rows == size
    rng = np.random.default_rng(seed)
    for step, batch in enumerate(random_batches(seed, 300, size)):
        for window in (immediate, every_16, default):
            window.observe(batch)
        if rng.random() < 0.1 or step == 299:
            expected = immediate.counts()
            assert every_16.counts() == expected and default.counts() == expected, f"after batch {step}"
            assert every_16.rows == default.rows == immediate.rows
            reports = [window.report() for window in (immediate, every_16, default)]
            assert reports[1] == reports[0] and reports[2] == reports[0]
    assert (
        immediate.rows == size
        and immediate.dropped_rows == every_16.dropped_rows == default.dropped_rows == 0
    )


def test_a_bad_batch_among_pending_ones_is_dropped_alone(reference_profile, caplog):
    good = [rows(200 + i, 1 + i % 3) for i in range(40)]
    bad = {
        5: {"distance": [1.0], "delay": [2.0]},  # lacks carrier
        17: {"distance": ["far", 1.0], "delay": [2.0, 3.0], "carrier": ["AA", "B6"]},
        # Ragged, one short and the next one long: the lengths of the two together agree.
        30: {"distance": [1.0, 2.0], "delay": [2.0], "carrier": ["AA", "B6"]},
        31: {"distance": [1.0, 2.0], "delay": [2.0, 3.0, 4.0], "carrier": ["AA", "B6"]},
    }
    window = window_of(reference_profile, 50)
    caplog.set_level(logging.WARNING, "kfstack.live_drift")
    for i, batch in enumerate(good):
        window.observe(batch)
        if i in bad:
            window.observe(bad[i])
    only_good = window_of(reference_profile, 50, pending_rows=1)
    for batch in good:
        only_good.observe(batch)
    assert window.counts() == only_good.counts()
    assert window.dropped_rows == 7 and only_good.dropped_rows == 0
    # One warning per binning that dropped any: pending rows were binned on reaching the window's
    # size (50) and at the read.
    warnings = [r.getMessage() for r in caplog.records]
    assert 1 <= len(warnings) <= 3
    assert all(w.startswith("live drift: ") and "dropped, not binnable" in w for w in warnings)


def test_each_read_bins_what_is_pending_and_pending_rows_stay_bounded(reference_profile):
    deferred = window_of(reference_profile, 100, pending_rows=40)
    immediate = window_of(reference_profile, 100, pending_rows=1)

    def both(batch: dict) -> None:
        deferred.observe(batch)
        immediate.observe(batch)

    both(rows(300, 100))  # at least the bound: binned at once
    assert deferred._pending_count == 0
    for i in range(39):
        both(rows(400 + i, 1, shift=2.0))
    assert deferred._pending_count == 39  # no read, under the bound: nothing binned yet
    assert deferred.report() == immediate.report()
    assert deferred._pending_count == 0
    for i in range(5):
        both(rows(500 + i, 1, shift=1.0))
    assert deferred.counts() == immediate.counts()
    both({"distance": [1.0], "delay": [1.0]})  # lacks carrier: dropped
    assert deferred.dropped_rows == 1 and deferred._pending_count == 0
    both({"distance": [], "delay": [], "carrier": []})  # no rows: nothing added, nothing dropped
    assert deferred.counts() == immediate.counts() and deferred.dropped_rows == 1
    fresh = window_of(reference_profile, 100)
    for i in range(10):
        fresh.observe(rows(600 + i, 1))
    assert fresh.rows == 10
    for i in range(2000):  # a server nobody scrapes: the pending rows never reach the bound
        deferred.observe(rows(700 + i % 50, 1))
        assert deferred._pending_count < deferred.pending_rows
    for _ in range(100):  # nor do batches whose rows cannot even be counted
        deferred.observe({"carrier_code": 1.0})
        assert len(deferred._pending) < deferred.pending_rows
    assert deferred.dropped_rows == 1  # none counted
    with pytest.raises(InvalidParameterError, match="pending_rows: 0; at least 1 row"):
        window_of(reference_profile, 100, pending_rows=0)


def test_a_matrix_without_columns_is_refused_when_observed(reference_profile):
    """The server's wiring, not a request: known at once, not when binned."""
    window = window_of(reference_profile, 10)
    with pytest.raises(InvalidParameterError, match="a matrix needs the model's columns"):
        window.observe(np.zeros((2, 3)))
    assert window.rows == 0 and window.dropped_rows == 0


def test_threads_observing_while_a_scrape_reads_lose_no_row(reference_profile):
    import threading

    window = window_of(reference_profile, 5000, pending_rows=64)
    row = rows(600, 1)
    stop = threading.Event()

    def scrape() -> None:
        while not stop.is_set():
            window.report()
            window.counts()

    def observe() -> None:
        for _ in range(1000):
            window.observe(row)

    reader = threading.Thread(target=scrape)
    reader.start()
    writers = [threading.Thread(target=observe) for _ in range(4)]
    for thread in writers:
        thread.start()
    for thread in writers:
        thread.join()
    stop.set()
    reader.join()
    alone = window_of(reference_profile, 5000)
    alone.observe({name: values * 4000 for name, values in row.items()})
    assert window.rows == 4000 and window.counts() == alone.counts()


def test_matrices_of_different_dtypes_are_binned_apart():
    """Joined, a bool matrix would become floats (``True`` then reads as the category "1")."""
    profile = {
        "numeric": {"x": {"histogram": {"edges": [0.0, 1.0, 2.0], "counts": [1, 1]}}},
        "categorical": {"code": {"top_values": {"1": 0.5, "True": 0.5}}},
        "feature_order": ["x", "code"],
    }
    reference = Reference(profile)
    deferred, immediate = (
        LiveDrift(reference, 10, columns=("x", "code"), pending_rows=n, request_rows=10) for n in (10, 1)
    )
    for batch in (np.array([[0.5, 1.0]]), np.array([[True, True]]), np.array([[1.5, 1.0]])):
        deferred.observe(batch)
        immediate.observe(batch)
    assert deferred.counts() == immediate.counts() == {"x": [0, 1, 2], "code": [2, 1, 0]}


def test_rows_binned_by_two_threads_at_once_enter_in_the_order_observed(reference_profile):
    """A request binning the pending rows while another observes and bins its own: the later
    rows wait, whatever thread bins first."""
    import threading

    window = window_of(reference_profile, 2, pending_rows=1)
    first, second, third = rows(700, 1, shift=2.0), rows(701, 1), rows(702, 1, shift=-2.0)
    release, binning = threading.Event(), threading.Event()
    bins = window.bins

    def slow_bins(batch):
        if not binning.is_set():
            binning.set()
            assert release.wait(10)
        return bins(batch)

    window.bins = slow_bins  # type: ignore[method-assign]
    early = threading.Thread(target=window.observe, args=(first,))
    early.start()
    assert binning.wait(10)  # the first row is being binned
    late = threading.Thread(target=window.observe, args=(second,))
    late.start()
    late.join(0.3)  # it observed, and now waits to bin (or, binning first, is done)
    release.set()
    early.join()
    late.join()
    window.observe(third)  # evicts the oldest row: the first
    expected = window_of(reference_profile, 2)
    expected.observe({name: second[name] + third[name] for name in second})
    assert window.counts() == expected.counts()


def test_one_request_adds_at_most_its_share_of_the_window(reference_profile):
    """A client's one large request of unusual inputs moves the window by ``request_rows`` rows,
    a random sample of its own (1% of the window by default); without the cap it would take the
    whole window over."""
    capped = LiveDrift(Reference(reference_profile), 2000, seed=1)
    uncapped = window_of(reference_profile, 2000)
    assert capped.request_rows == 20
    for window in (capped, uncapped):
        for seed in range(1, 101):  # ordinary traffic fills the window, 20 rows a request
            window.observe(rows(seed, 20))
        assert window.report().max_psi < 0.2
        window.observe(rows(500, 2000, shift=2))  # one hostile request of 2,000 shifted rows
    assert capped.sampled_rows == 1980 and capped.rows == 2000
    assert capped.report().max_psi < 0.2 < uncapped.report().max_psi
