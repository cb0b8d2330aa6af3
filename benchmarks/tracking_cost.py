"""Benchmark: what tracking an embedded run in MLflow costs, against the same run untracked.

flights-training on the default data with a seeded tuner, ``pairs`` interleaved pairs (off, then
on), each run with ``--no-cache`` so that every step runs. The tracked runs share one pipeline
root, so its store is warm after the first (as a team's is): the first tracked run's wall is
reported apart, and the ratio is taken over every pair. Reported: each pair's on/off ratio, their
median, the off runs' spread (what a ratio near 1 is within), the summaries' figures compared (the
tuner is seeded; tracking must change none of them), and what a tracked run holds.

    python -m benchmarks.tracking_cost [--pairs 5] [--param k=v ...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile

from benchmarks.common import machine_facts, run_locally, write_result

PIPELINE = "flights-training"
SEEDED = {"tuning_algorithm_settings": '{"random_state": 7}'}


def _figures(summary: dict) -> dict:
    return {"metrics": summary["metrics"], "data": summary["data"], "tuning": summary.get("tuning")}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--param", action="append", default=[], metavar="K=V")
    args = parser.parse_args(argv)
    parameters = {**SEEDED, **dict(item.split("=", 1) for item in args.param)}
    scratch = tempfile.mkdtemp(prefix="kfstack-tracking-cost-")
    roots = {"off": os.path.join(scratch, "off"), "on": os.path.join(scratch, "on")}
    walls: dict[str, list[float]] = {"off": [], "on": []}
    summaries: dict[str, list[dict]] = {"off": [], "on": []}
    env_off = os.environ.get("KFSTACK_TRACKING")
    for pair in range(args.pairs):
        for mode in ("off", "on"):
            flags = ["--no-cache"] + (["--no-tracking"] if mode == "off" else [])
            os.environ.pop("KFSTACK_TRACKING", None)
            wall, summary = run_locally(PIPELINE, parameters, roots[mode], *flags)
            walls[mode].append(round(wall, 1))
            summaries[mode].append(summary)
            print(f"pair {pair + 1} {mode}: {wall:.1f} s", flush=True)
    if env_off is not None:
        os.environ["KFSTACK_TRACKING"] = env_off
    ratios = [round(on / off, 3) for on, off in zip(walls["on"], walls["off"], strict=True)]
    last_on = summaries["on"][-1]
    reference = _figures(summaries["off"][0])
    result = {
        "benchmark": "tracking_cost",
        "machine": machine_facts(),
        "parameters": parameters,
        "walls_off": walls["off"],
        "walls_on": walls["on"],
        "ratios_on_over_off": ratios,
        "median_ratio": statistics.median(ratios),
        "median_ratio_warm_store": statistics.median(ratios[1:]) if len(ratios) > 1 else None,
        "off_spread": [min(walls["off"]), max(walls["off"])],
        "figures_unchanged": all(_figures(s) == reference for s in summaries["on"]),
        "figures_of_off_runs_equal": all(_figures(s) == reference for s in summaries["off"]),
        "tracking": last_on.get("tracking"),
        "off_summary_tracking": summaries["off"][-1].get("tracking"),
    }
    print(write_result(result))


if __name__ == "__main__":
    main()
