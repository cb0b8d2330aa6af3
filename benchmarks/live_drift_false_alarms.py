"""Benchmark: live drift's false alarms on undrifted traffic, and a drifted window's PSI.

The reference is the feature job's training profile of the shipped flights (``profile.json``,
what a model directory carries); the traffic is the same job's held-out test split
(``test_requests.parquet``: flights of the same year never trained on), typed and checked as the
predictor takes a request and turned into features by the predictor's own path
(:func:`kfstack_examples.flights.features.raw_feature_columns` with the model's lookups). The rows
stream through :class:`kfstack.monitoring.live_drift.LiveDrift` in requests of ``--batch`` rows,
and the window is scraped every ``--scrape-rows`` rows (a traffic rate times a scrape interval:
10 rows/s scraped every 30 s is 300), the calendar features ignored as the flights predictor
ignores them by default. Two replays:

- **exchangeable** (the false-alarm figure): the held-out rows shuffled, ``--shuffles`` times
  over -- traffic from the training distribution, nothing but sampling noise;
- **time-ordered**: the held-out rows in departure order -- a year of real seasons (weather,
  the schedule's months), what a window of that many rows sees in production order.

Per window size: the max PSI's quantiles over the scrapes, the share of scrapes above the line,
and the alerts an alert with ``for: --for-minutes`` would raise (runs of consecutive scrapes
above the line at least that long), per hour of the stated traffic. Then drifted traffic: the
flights' own ``synthetic_drift`` transform (Spark; :func:`.features_job.synthetic_drift.
inject_drift`) on the held-out rows at several shares, each window's max PSI.

    python -m benchmarks.live_drift_false_alarms [--features-uri DIR] [--shuffles 10]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import tempfile
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from benchmarks.common import machine_facts, write_result
from kfstack.monitoring.drift import DriftThresholds
from kfstack.monitoring.live_drift import LiveDrift, Reference, read_reference

WINDOWS = (500, 1000, 2000, 5000)
DRIFT_SHARES = (0.05, 0.1, 0.25, 0.5)
THRESHOLD = DriftThresholds().max_psi


def held_out_records(features_uri: str) -> list[dict[str, Any]]:
    """The test split's flights as requests, typed and checked (label dropped), in file order."""
    import pyarrow.parquet as pq

    from kfstack_examples.flights.feature_spec import LABEL_COLUMN, TEST_REQUESTS_FILE
    from kfstack_examples.flights.scoring import REQUEST_SCHEMA, check_flights

    rows = pq.read_table(os.path.join(features_uri, TEST_REQUESTS_FILE)).to_pylist()
    for row in rows:
        row.pop(LABEL_COLUMN, None)
    records = REQUEST_SCHEMA.typed(rows, "test_requests")
    check_flights(records, "test_requests")
    return records


def feature_columns(features_uri: str, records: Sequence[dict[str, Any]]) -> dict[str, np.ndarray]:
    """The predictor's raw features of ``records``, as arrays (one per feature)."""
    import pyarrow.parquet as pq

    from kfstack_examples.flights.feature_spec import AIRPORT_LOOKUP_FILE, PLANE_LOOKUP_FILE
    from kfstack_examples.flights.features import raw_feature_columns

    def keyed(name: str, key: str) -> dict[str, dict]:
        rows = pq.read_table(os.path.join(features_uri, name)).to_pylist()
        return {row[key]: row for row in rows if row.get(key) is not None}

    columns = raw_feature_columns(
        records, keyed(PLANE_LOOKUP_FILE, "tailnum"), keyed(AIRPORT_LOOKUP_FILE, "faa")
    )
    return {name: np.asarray(values, dtype=object) for name, values in columns.items()}


@dataclasses.dataclass(frozen=True)
class HeldOutTraffic:
    """What the live-drift benchmarks replay: the feature job's output, its training profile as
    the window's reference, the held-out flights as requests, and their features."""

    features: str
    reference: Reference
    records: list[dict[str, Any]]
    columns: dict[str, np.ndarray]


def held_out_traffic(features_uri: str | None, tmp: str) -> HeldOutTraffic:
    """The traffic of ``features_uri`` (default: the feature job, run first into ``tmp``)."""
    from benchmarks.ddp_scaling import build_features

    features = features_uri or build_features(tmp)
    reference = read_reference(features)
    assert reference is not None, f"no profile.json in {features}"
    records = held_out_records(features)
    return HeldOutTraffic(features, reference, records, feature_columns(features, records))


def drifted_records(records: list[dict[str, Any]], share: float, seed: int = 7) -> list[dict[str, Any]]:
    """``records`` through the flights' synthetic drift transform (Spark, one local core)."""
    import pandas as pd

    from kfstack_examples.flights.features_job.job import local_spark_session
    from kfstack_examples.flights.features_job.synthetic_drift import inject_drift

    spark = local_spark_session(shuffle_partitions=1)
    frame = spark.createDataFrame(pd.DataFrame(records).assign(arr_delay=0.0))
    changed = inject_drift(frame, share, seed).drop("arr_delay").collect()
    # pandas sent missing numbers as NaN: back to the None a request carries.
    return [
        {k: (None if isinstance(v, float) and np.isnan(v) else v) for k, v in row.asDict().items()}
        for row in changed
    ]


def stream(
    columns: dict[str, np.ndarray], order: np.ndarray, window: LiveDrift, batch: int, scrape_rows: int
) -> list[float]:
    """``order``'s rows through ``window`` in requests of ``batch`` rows; its max PSI at every
    scrape once full."""
    maxima = []
    since_scrape = 0
    for start in range(0, len(order), batch):
        rows = order[start : start + batch]
        window.observe({name: values[rows].tolist() for name, values in columns.items()})
        since_scrape += len(rows)
        if since_scrape >= scrape_rows:
            since_scrape = 0
            report = window.report()
            if report is not None:
                maxima.append(report.max_psi)
    return maxima


def alerts(maxima: Sequence[float], scrapes_for: int, threshold: float) -> int:
    """Alerts raised by a rule that fires when the max PSI stays above ``threshold`` for
    ``scrapes_for`` consecutive scrapes (one alert per such run)."""
    raised, run = 0, 0
    for value in maxima:
        run = run + 1 if value > threshold else 0
        if run == scrapes_for:
            raised += 1
    return raised


def summary(maxima: Sequence[float], scrapes_for: int, hours: float) -> dict[str, Any]:
    values = np.asarray(maxima)
    raised = alerts(maxima, scrapes_for, THRESHOLD)
    return {
        "scrapes": len(values),
        "max_psi_p50": round(float(np.percentile(values, 50)), 4),
        "max_psi_p99": round(float(np.percentile(values, 99)), 4),
        "max_psi_max": round(float(values.max()), 4),
        "share_of_scrapes_above_line": round(float((values > THRESHOLD).mean()), 5),
        "alerts": raised,
        "hours_of_traffic": round(hours, 2),
        "alerts_per_hour": round(raised / hours, 4),
    }


def run(
    features_uri: str | None,
    shuffles: int,
    batch: int,
    rows_per_second: float,
    scrape_seconds: float,
    for_minutes: float,
) -> dict[str, Any]:
    from kfstack_examples.flights.features import CALENDAR_FEATURES

    scrape_rows = round(rows_per_second * scrape_seconds)
    scrapes_for = round(for_minutes * 60 / scrape_seconds)
    thresholds = DriftThresholds(ignored_features=CALENDAR_FEATURES)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="kfstack-live-drift-") as tmp:
        traffic = held_out_traffic(features_uri, tmp)
        features, reference, records, columns = (
            traffic.features,
            traffic.reference,
            traffic.records,
            traffic.columns,
        )
        rows = len(records)
        rng = np.random.default_rng(0)
        chronological = np.lexsort(
            [
                [r["sched_dep_time"] for r in records],
                [r["day"] for r in records],
                [r["month"] for r in records],
            ]
        )
        exchangeable: dict[str, Any] = {}
        ordered: dict[str, Any] = {}
        drift_features: dict[str, list[str]] = {}
        for size in WINDOWS:
            maxima: list[float] = []
            observed = 0
            for _ in range(shuffles):
                window = LiveDrift(reference, size, thresholds)
                maxima += stream(columns, rng.permutation(rows), window, batch, scrape_rows)
                observed += rows
            exchangeable[str(size)] = summary(maxima, scrapes_for, observed / rows_per_second / 3600)
            window = LiveDrift(reference, size, thresholds)
            in_order = stream(columns, chronological, window, batch, scrape_rows)
            ordered[str(size)] = summary(in_order, scrapes_for, rows / rows_per_second / 3600)
            last = window.report()
            if last is not None:
                drift_features[str(size)] = last.drifted_features(THRESHOLD)
        drifted: dict[str, dict[str, float]] = {}
        # Its own seed: the drifted rows do not depend on how many shuffles came before.
        sample = np.random.default_rng(1).permutation(rows)[: max(WINDOWS)]
        for share in DRIFT_SHARES:
            shifted = drifted_records([records[i] for i in sample], share)
            shifted_columns = feature_columns(features, shifted)
            drifted[str(share)] = {}
            for size in WINDOWS:
                # A window of drifted traffic from many clients: every row enters (no request's cap).
                window = LiveDrift(reference, size, thresholds, request_rows=size)
                window.observe({name: values[:size].tolist() for name, values in shifted_columns.items()})
                report = window.report()
                assert report is not None
                drifted[str(share)][str(size)] = round(report.max_psi, 4)
    return {
        "benchmark": "live_drift_false_alarms",
        "command": f"python -m benchmarks.live_drift_false_alarms --shuffles {shuffles} --batch {batch} "
        f"--rows-per-second {rows_per_second} --scrape-seconds {scrape_seconds} --for-minutes {for_minutes}",
        "machine": machine_facts(),
        "held_out_rows": rows,
        "profiled_features": len(reference.names),
        "ignored_features": list(CALENDAR_FEATURES),
        "threshold": THRESHOLD,
        "traffic": {
            "rows_per_second": rows_per_second,
            "scrape_seconds": scrape_seconds,
            "rows_per_scrape": scrape_rows,
            "for_minutes": for_minutes,
            "scrapes_for": scrapes_for,
        },
        "exchangeable": exchangeable,
        "time_ordered": ordered,
        "time_ordered_features_above_line_at_the_end": drift_features,
        "drifted_max_psi_by_share_and_window": drifted,
        "seconds": round(time.perf_counter() - started, 1),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--features-uri", default=None, help="a feature job's output (default: run it)")
    parser.add_argument("--shuffles", type=int, default=10, help="shuffled replays of the held-out rows")
    parser.add_argument("--batch", type=int, default=10, help="rows per request")
    parser.add_argument("--rows-per-second", type=float, default=10.0)
    parser.add_argument("--scrape-seconds", type=float, default=30.0)
    parser.add_argument("--for-minutes", type=float, default=10.0, help="the alert's for")
    args = parser.parse_args(argv)
    result = run(
        args.features_uri,
        args.shuffles,
        args.batch,
        args.rows_per_second,
        args.scrape_seconds,
        args.for_minutes,
    )
    write_result(result)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
