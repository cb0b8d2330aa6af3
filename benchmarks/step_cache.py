"""Benchmark: a second embedded run with only ``learning_rate`` changed, against the first.

Both runs go to one new pipeline root, so the first finds the step cache empty and the second
finds the first's entries (:mod:`kfstack.app.step_cache`). The second reuses what does not depend
on ``learning_rate`` (the Spark step) and runs the rest again: tuning and training take it as
an input, and every step after them takes their new outputs. Each round is one such pair, in a
root of its own; the ratio second / first is taken round by round.

    python -m benchmarks.step_cache [--rounds 2] [--param k=v ...]

Default parameters: flights-training ``sample_fraction=0.05 epochs=1 tuning_trial_epochs=1
tuning_early_stopping=none deploy=false``, then ``learning_rate`` 0.003 -> 0.004.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile

from benchmarks.common import machine_facts, run_locally, write_result

PIPELINE = "flights-training"
SMALL = {
    "sample_fraction": "0.05",
    "epochs": "1",
    "tuning_trial_epochs": "1",
    "tuning_early_stopping": "none",
    "deploy": "false",
}
FIRST_RATE, SECOND_RATE = "0.003", "0.004"


def _run(root: str, parameters: dict[str, str]) -> dict:
    """One ``kfstack run --local``, the cache on: its wall from outside, and its stages."""
    wall, summary = run_locally(PIPELINE, parameters, root)
    return {
        "wall_seconds": round(wall, 2),
        "stages": {name: [stage["status"], stage["seconds"]] for name, stage in summary["stages"].items()},
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.step_cache", description=__doc__)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--param", action="append", default=[], metavar="NAME=VALUE")
    args = parser.parse_args(argv)
    parameters = {**SMALL, **dict(p.split("=", 1) for p in args.param)}

    rounds = []
    for _ in range(args.rounds):
        root = tempfile.mkdtemp(prefix="kfstack-bench-cache-")
        try:
            first = _run(root, {**parameters, "learning_rate": FIRST_RATE})
            second = _run(root, {**parameters, "learning_rate": SECOND_RATE})
        finally:
            shutil.rmtree(root, ignore_errors=True)
        rounds.append(
            {"first": first, "second": second, "ratio": second["wall_seconds"] / first["wall_seconds"]}
        )
        print(
            f"first {first['wall_seconds']:.1f} s, second {second['wall_seconds']:.1f} s "
            f"(cached: {[n for n, (status, _) in second['stages'].items() if status == 'CACHED']})",
            flush=True,
        )
    ratios = [r["ratio"] for r in rounds]
    result = {
        "benchmark": "step_cache",
        "command": "python -m benchmarks.step_cache " + " ".join(argv or []),
        "machine": machine_facts(),
        "pipeline": PIPELINE,
        "parameters": parameters,
        "learning_rate": [FIRST_RATE, SECOND_RATE],
        "rounds": rounds,
        "first_wall_median": statistics.median(r["first"]["wall_seconds"] for r in rounds),
        "second_wall_median": statistics.median(r["second"]["wall_seconds"] for r in rounds),
        "ratio_median": round(statistics.median(ratios), 3),
        "ratio_range": [round(min(ratios), 3), round(max(ratios), 3)],
    }
    print(
        f"second / first: {result['ratio_median']} ({result['ratio_range'][0]}-{result['ratio_range'][1]}); "
        f"first {result['first_wall_median']:.1f} s, second {result['second_wall_median']:.1f} s; "
        f"written {write_result(result)}"
    )
    return result


if __name__ == "__main__":
    main()
