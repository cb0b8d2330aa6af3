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


# Figures that measure time (durations, throughput, latency, and the costs priced from them):
# they differ between any two runs, tracked or not.
TIMED = (
    "_seconds",
    "seconds_per_epoch",
    "per_second",
    "per_second_per_replica",
    "_ms",
    "job_cost",
    "cost_per_epoch",
)


def _figures(summary: dict) -> dict:
    """The summary's figures that do not measure time, flattened (``metrics.<output>.<name>``)."""
    flat: dict = {}

    def walk(value: object, key: str) -> None:
        if isinstance(value, dict):
            for name, item in value.items():
                walk(item, f"{key}.{name}" if key else str(name))
        elif not key.endswith(TIMED):
            flat[key] = value

    walk({"metrics": summary["metrics"], "data": summary["data"], "tuning": summary.get("tuning")}, "")
    return flat


def figures_differing(untracked: dict, tracked: dict) -> list[str]:
    """The figures (not measuring time) in which a tracked run's summary differs from its pair's
    untracked one. Pairs, not runs: each pipeline root keeps its registry, so a root's first run
    deploys without a canary and its later runs with one."""
    off, on = _figures(untracked), _figures(tracked)
    return sorted(key for key in off.keys() | on.keys() if off.get(key) != on.get(key))


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
    differing = [
        figures_differing(off, on) for off, on in zip(summaries["off"], summaries["on"], strict=True)
    ]
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
        "figures_compared_per_pair": [len(_figures(on)) for on in summaries["on"]],
        "figures_differing_per_pair": differing,
        "tracking": last_on.get("tracking"),
        "off_summary_tracking": summaries["off"][-1].get("tracking"),
    }
    print(write_result(result))


if __name__ == "__main__":
    main()
