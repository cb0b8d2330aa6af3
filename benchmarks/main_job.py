"""Benchmark: the main job (flights-training, embedded, full data) end to end.

Runs ``kfstack run --local`` in a fresh process, exactly as ``make run`` does, and reports its
wall time, seconds per stage and the peak resident memory summed over the whole process tree
(the kfp.local tasks, Spark's JVM and the trainer ranks) as sampled by the local runner.

    python -m benchmarks.main_job [--param k=v ...] [--runs N]

``--runs 2`` runs it twice into one pipeline root, as ``make run`` twice: the first run deploys
its model straight to production, the second canaries against it.

Goals (issue: the flights training pipeline runs end to end): <= 180 s and <= 6 GiB on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile

from benchmarks.common import machine_facts, run_locally, write_result

WALL_GOAL_SECONDS = 180.0
MEMORY_GOAL_BYTES = 6 * 2**30


def run(params: list[str], tmp: str, pipeline: str = "flights-training") -> dict:
    """One run of ``pipeline`` into ``<tmp>/runs`` (shared by the runs of one benchmark: its
    model registry)."""
    parameters = dict(p.split("=", 1) for p in params)
    _, summary = run_locally(pipeline, parameters, os.path.join(tmp, "runs"))
    return {
        "benchmark": "main_job",
        "command": f"kfstack run --local {pipeline} " + " ".join(f"--param {p}" for p in params),
        "machine": machine_facts(),
        "wall_seconds": summary["wall_seconds"],
        "stages": {name: stage["seconds"] for name, stage in summary["stages"].items()},
        "peak_rss_gib": round(summary["peak_rss_bytes"] / 2**30, 2),
        "data": summary["data"],
        "test_auc": summary["metrics"].get("evaluation_metrics.auc"),
        "serving": summary.get("serving"),
        "drift": summary.get("drift"),
        "gate": summary.get("gate"),
        "goal": {"wall_seconds": WALL_GOAL_SECONDS, "peak_rss_gib": MEMORY_GOAL_BYTES / 2**30},
        "meets_goal": {
            "wall": summary["wall_seconds"] <= WALL_GOAL_SECONDS,
            "memory": summary["peak_rss_bytes"] <= MEMORY_GOAL_BYTES,
        },
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--param", action="append", default=[])
    parser.add_argument("--runs", type=int, default=1, help="runs into one pipeline root (default 1)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="kfstack-bench-") as tmp:
        results = [run(args.param, tmp) for _ in range(args.runs)]
    result = results[0] if len(results) == 1 else {**results[-1], "runs": results}
    write_result(result)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
