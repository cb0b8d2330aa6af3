"""Benchmark: what live drift costs a request, in process, on the flights predictor's feature path.

No server: the request loop of the predictor's ``predict`` reduced to what live drift touches,
the records' raw feature columns built (:meth:`FlightScorer.raw_columns`) and observed, with the
window on (the default 2,000 rows and pending bound, filled first so every row also evicts) and
off (:data:`~kfstack.monitoring.live_drift.NO_LIVE_DRIFT`), in alternating rounds. Figures: the
loop's time per request on and off (the difference is what live drift adds, garbage collection
included, which a timer around ``observe`` alone misses), ``observe``'s own cost per call
(median, p99 and the slowest: the call that bins the pending rows), the garbage collector's
collections per generation while on, ``observe`` of 1,000 records, and the report a scrape
computes with nothing pending and with 100 one-record requests pending.

    python -m benchmarks.live_drift_observe_cost [--model DIR] [--requests 20000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import tempfile
import time
from typing import Any

from benchmarks.common import machine_facts, write_result
from benchmarks.predictor_throughput import sample_records, trained_model_dir
from kfstack.monitoring.drift import DriftThresholds
from kfstack.monitoring.live_drift import NO_LIVE_DRIFT, LiveDrift, read_reference
from kfstack_examples.flights.features import CALENDAR_FEATURES
from kfstack_examples.flights.scoring import REQUEST_SCHEMA, FlightScorer

RECORDS = 2000


class Collections:
    """The garbage collector's collections and their time per generation, while counting."""

    def __init__(self) -> None:
        self.counts = [0, 0, 0]
        self.seconds = [0.0, 0.0, 0.0]
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.counts[info["generation"]] += 1
            self.seconds[info["generation"]] += time.perf_counter() - self._started


def request_loop(scorer: FlightScorer, records: list[dict], window: Any, requests: int) -> dict[str, Any]:
    """``requests`` one-record requests: columns built, observed, let go (as in ``predict``)."""
    calls = []
    collections = Collections()
    gc.collect()
    gc.callbacks.append(collections)
    try:
        started = time.perf_counter()
        for i in range(requests):
            columns = scorer.raw_columns(REQUEST_SCHEMA.from_v1({"instances": [records[i % len(records)]]}))
            before = time.perf_counter()
            window.observe(columns)
            calls.append(time.perf_counter() - before)
        elapsed = time.perf_counter() - started
    finally:
        gc.callbacks.remove(collections)
    calls.sort()
    return {
        "loop_us_per_request": elapsed / requests * 1e6,
        "observe_us_mean": statistics.fmean(calls) * 1e6,
        "observe_us_p50_p99_max": [calls[int(q * (len(calls) - 1))] * 1e6 for q in (0.5, 0.99, 1.0)],
        "gc_collections_per_generation": collections.counts,
        "gc_ms_per_generation": [s * 1e3 for s in collections.seconds],
    }


def timed_ms(action: Any, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e3


def run(model_dir: str | None, features_uri: str | None, requests: int, rounds: int) -> dict[str, Any]:
    records = sample_records(RECORDS)
    with tempfile.TemporaryDirectory(prefix="kfstack-observe-bench-") as tmp:
        model = model_dir or trained_model_dir(features_uri, tmp)
        reference = read_reference(model)
        assert reference is not None, "the model directory carries no profile"
        scorer = FlightScorer(model)
    thresholds = DriftThresholds(ignored_features=CALENDAR_FEATURES)
    thousand = [
        scorer.raw_columns(REQUEST_SCHEMA.from_v1({"instances": records[i : i + 1000]})) for i in (0, 1000)
    ]

    def full_window() -> LiveDrift:
        window = LiveDrift(reference, thresholds=thresholds)
        for batch in thousand:
            window.observe(batch)
        window.report()
        return window

    loops: dict[str, list[dict]] = {"on": [], "off": []}
    for turn in range(rounds):
        for mode in ("on", "off") if turn % 2 == 0 else ("off", "on"):
            window = full_window() if mode == "on" else NO_LIVE_DRIFT
            loops[mode].append(request_loop(scorer, records, window, requests))

    window = full_window()
    one_record = [scorer.raw_columns(REQUEST_SCHEMA.from_v1({"instances": [r]})) for r in records[:100]]

    def report_with_pending() -> None:
        for batch in one_record:
            window.observe(batch)
        window.report()

    def median(mode: str, field: str) -> float:
        return statistics.median(loop[field] for loop in loops[mode])

    on, off = median("on", "loop_us_per_request"), median("off", "loop_us_per_request")
    return {
        "benchmark": "live_drift_observe_cost",
        "command": f"python -m benchmarks.live_drift_observe_cost --requests {requests} --rounds {rounds}",
        "machine": machine_facts(),
        "features": len(reference.features),
        "one_record": {
            "loop_us_per_request_on": round(on, 2),
            "loop_us_per_request_off": round(off, 2),
            "live_drift_us_per_request": round(on - off, 2),
            "observe_us_mean": round(median("on", "observe_us_mean"), 2),
            "observe_us_p50_p99_max": [round(v, 1) for v in loops["on"][-1]["observe_us_p50_p99_max"]],
            "gc_collections_per_generation_on": loops["on"][-1]["gc_collections_per_generation"],
            "gc_collections_per_generation_off": loops["off"][-1]["gc_collections_per_generation"],
        },
        "observe_1000_records_ms": round(timed_ms(lambda: window.observe(thousand[0]), 30), 3),
        "report_ms": round(timed_ms(window.report, 30), 3),
        # The 100 observe() calls (about 0.2 ms) are inside the time.
        "observe_100_then_report_ms": round(timed_ms(report_with_pending, 30), 3),
        "rounds": {mode: [round(loop["loop_us_per_request"], 2) for loop in v] for mode, v in loops.items()},
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="a trained model directory (with its profile.json)")
    parser.add_argument("--features-uri", default=None)
    parser.add_argument("--requests", type=int, default=20000, help="one-record requests per round")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds of on and off")
    args = parser.parse_args(argv)
    result = run(args.model, args.features_uri, args.requests, args.rounds)
    write_result(result)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
