"""Benchmark: how much one client must send to hold the live-drift alert, with and without the cap
on the rows one request adds to the window (``--live_drift_request_rows``, 1% of it by default).

The window (2,000 rows, the flights predictor's features, the calendar ignored) starts full of
undrifted traffic: the held-out flights, as :mod:`benchmarks.live_drift_false_alarms` streams them.
Then, for ``--for-minutes`` (the alert's ``for``), background traffic keeps coming at 0, 1 or 10
rows/s in one-row requests, the window is scraped every 30 s, and a client sends, before each
scrape, ``k`` requests of ``n`` unusual rows (every flight through the flights' own
``synthetic_drift``: departure 3 h later, route x1.5). The figure is the fewest rows the client
must send per scrape interval so that every scrape of the ``for`` reads above the line (the alert
fires), searched over ``n`` with one request (no cap) and over ``k`` with requests of the cap's
size (the cap: a larger request adds no more).

    python -m benchmarks.live_drift_steering [--features-uri DIR]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from typing import Any

import numpy as np

from benchmarks.common import machine_facts, write_result
from benchmarks.live_drift_false_alarms import drifted_records, feature_columns, held_out_traffic
from kfstack.monitoring.drift import DriftThresholds
from kfstack.monitoring.live_drift import LiveDrift, Reference

WINDOW = 2000
BACKGROUND_ROWS_PER_SECOND = (0, 1, 10)
SCRAPE_SECONDS = 30
NO_CAP = 10**9


def _take(columns: dict[str, np.ndarray], rows: np.ndarray) -> dict[str, list]:
    return {name: values[rows].tolist() for name, values in columns.items()}


def holds_alert(
    reference: Reference,
    thresholds: DriftThresholds,
    normal: dict[str, np.ndarray],
    unusual: dict[str, np.ndarray],
    background: int,
    requests: int,
    rows_each: int,
    request_rows: int,
    scrapes: int,
) -> bool:
    """Whether ``requests`` requests of ``rows_each`` unusual rows before each scrape keep every
    one of ``scrapes`` scrapes above the line, over ``background`` rows/s of normal traffic."""
    window = LiveDrift(reference, WINDOW, thresholds, request_rows=request_rows, seed=3)
    normal_rows = len(next(iter(normal.values())))
    unusual_rows = len(next(iter(unusual.values())))
    rng = np.random.default_rng(11)
    for start in range(0, WINDOW, window.request_rows if request_rows < NO_CAP else WINDOW):
        size = min(WINDOW - start, window.request_rows if request_rows < NO_CAP else WINDOW)
        window.observe(_take(normal, rng.integers(0, normal_rows, size)))
    for _ in range(scrapes):
        for _ in range(background * SCRAPE_SECONDS):
            window.observe(_take(normal, rng.integers(0, normal_rows, 1)))
        for _ in range(requests):
            window.observe(_take(unusual, rng.integers(0, unusual_rows, rows_each)))
        report = window.report()
        if report is None or report.max_psi <= thresholds.max_psi:
            return False
    return True


def fewest(holds: Any, high: int) -> int | None:
    """The smallest value in 1..``high`` for which ``holds`` is true (it is monotone), or None."""
    if not holds(high):
        return None
    low = 1
    while low < high:
        middle = (low + high) // 2
        if holds(middle):
            high = middle
        else:
            low = middle + 1
    return low


def run(features_uri: str | None, for_minutes: float) -> dict[str, Any]:
    from kfstack_examples.flights.features import CALENDAR_FEATURES

    thresholds = DriftThresholds(ignored_features=CALENDAR_FEATURES)
    scrapes = round(for_minutes * 60 / SCRAPE_SECONDS)
    started = time.perf_counter()
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="kfstack-steering-") as tmp:
        traffic = held_out_traffic(features_uri, tmp)
        reference, records, normal = traffic.reference, traffic.records, traffic.columns
        sample = np.random.default_rng(1).permutation(len(records))[:WINDOW]
        unusual = feature_columns(traffic.features, drifted_records([records[i] for i in sample], 1.0))
        cap = max(1, WINDOW // 100)
        for background in BACKGROUND_ROWS_PER_SECOND:

            def uncapped(rows: int, background: int = background) -> bool:
                return holds_alert(
                    reference, thresholds, normal, unusual, background, 1, rows, NO_CAP, scrapes
                )

            def capped(requests: int, background: int = background) -> bool:
                return holds_alert(
                    reference, thresholds, normal, unusual, background, requests, cap, 0, scrapes
                )

            before = fewest(uncapped, WINDOW)
            after_requests = fewest(capped, 400)
            figures[str(background)] = {
                "before_rows_per_interval": before,
                "before_requests_per_interval": 1 if before else None,
                "after_rows_per_interval": after_requests * cap if after_requests else None,
                "after_requests_per_interval": after_requests,
            }
            print(background, figures[str(background)], flush=True)
    return {
        "benchmark": "live_drift_steering",
        "command": f"python -m benchmarks.live_drift_steering --for-minutes {for_minutes}",
        "machine": machine_facts(),
        "window_rows": WINDOW,
        "request_rows_cap": max(1, WINDOW // 100),
        "scrape_seconds": SCRAPE_SECONDS,
        "for_minutes": for_minutes,
        "per_background_rows_per_second": figures,
        "seconds": round(time.perf_counter() - started, 1),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--features-uri", default=None, help="a feature job's output (default: run it)")
    parser.add_argument("--for-minutes", type=float, default=10.0, help="the alert's for")
    args = parser.parse_args(argv)
    result = run(args.features_uri, args.for_minutes)
    print(write_result(result))
    return result


if __name__ == "__main__":
    main()
