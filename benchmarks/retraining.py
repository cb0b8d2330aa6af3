"""Benchmark: what a scheduled flights-retraining run costs, when nothing drifted and when it
retrains -- embedded, full data, one pipeline root (one model registry).

    python -m benchmarks.retraining [--param k=v ...]

Three runs, as ``tests/pipelines/test_flights_retraining_local.py`` makes them on a sample:

1. the first window (2013-01-01 .. 2013-06-30), nothing in production: trains and deploys first;
2. the window a week later: no drift -- the cost of a scheduled run that retrains nothing
   (production model, Spark job on the champion's edges, drift check);
3. the same window with a synthetic drift (30%): retrains, gates, canaries.

The baseline is run 2 in the same benchmark: what a run costs that only checks.
"""

from __future__ import annotations

import argparse
import json
import tempfile

from benchmarks.common import write_result
from benchmarks.main_job import run

PIPELINE = "flights-retraining"
RUNS = (
    ("first window", ["window_start=2013-01-01", "window_end=2013-06-30"]),
    ("a week later, no drift", ["window_start=2013-01-08", "window_end=2013-07-07"]),
    (
        "a week later, synthetic drift",
        ["window_start=2013-01-08", "window_end=2013-07-07", "synthetic_drift=0.3"],
    ),
)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--param", action="append", default=[], help="added to every run")
    args = parser.parse_args(argv)
    results = []
    with tempfile.TemporaryDirectory(prefix="kfstack-bench-") as tmp:
        for label, params in RUNS:
            result = run([*params, *args.param], tmp, pipeline=PIPELINE)
            results.append(
                {
                    "run": label,
                    "command": result["command"],
                    "wall_seconds": result["wall_seconds"],
                    "peak_rss_gib": result["peak_rss_gib"],
                    "stages": result["stages"],
                    "rows_read": result["data"].get("rows_read"),
                    "drift": {
                        k: (result["drift"] or {}).get(k) for k in ("decision", "max_psi", "drifted_features")
                    },
                    "gate": None
                    if result["gate"] is None
                    else {k: result["gate"][k] for k in ("decision", "challenger", "champion")},
                    "serving": None if result["serving"] is None else result["serving"]["decision"],
                }
            )
            machine = result["machine"]
    summary = {
        "benchmark": "retraining",
        "machine": machine,
        "runs": results,
        "check_only_seconds": results[1]["wall_seconds"],
        "retrain_seconds": results[2]["wall_seconds"],
    }
    write_result(summary)
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
