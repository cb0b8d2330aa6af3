"""Benchmark: how soon TPE with medianstop finds a good model, against random search.

Each arm is the tuning step's embedded run (``hyperparameter-tuning`` on the local platform: the real
trainer through the training step's local replicas, metric lines parsed as Katib's collector
parses them) with the same search space and budget, and only the algorithm and early stopping
changed. Every arm runs once per seed (the sampler's ``random_state``; the trainer's own seed is
the pipeline's, so a trial's result depends only on its parameters).

The figure per run is the *trial-seconds to a good model*: the summed wall time of the trials up
to and including the first one whose validation AUC is within ``--tolerance`` (relative) of the
best AUC any trial of any arm reached. Goal (issue: Katib tuning): TPE with medianstop needs at
most half of random search's trial-seconds, averaged over the seeds. A run that never gets there
counts with all its trial-seconds, and is marked.

    python -m benchmarks.tuning_efficiency [--features-uri DIR] [--seeds 1 2 3] [--max-trials 12]

Without ``--features-uri`` the feature job first runs on the full default data (4 shards).
Trials run one at a time (``tuning_parallel_trials=1``): each trial's two DDP ranks take both
cores of the small machine, and trial-seconds measured side by side would measure contention.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile

from benchmarks.common import machine_facts, write_result
from benchmarks.ddp_scaling import build_features

GOAL_RATIO = 0.5
# (arm, tuning_algorithm, tuning_early_stopping)
ARMS = (("random", "random", "none"), ("tpe+medianstop", "tpe", "medianstop"), ("tpe", "tpe", "none"))
COMPARED = ("tpe+medianstop", "random")


def tune(features: str, trials_dir: str, algorithm: str, early_stopping: str, seed: int, budget: dict):
    """One arm, one seed: the tuning step's embedded run (its ``StageResult``)."""
    from kfstack.components.tuning.hyperparameter_tuning.stage import STAGE
    from kfstack.pipelines import rendering
    from kfstack_examples.flights.pipelines.steps import TRAINING_CODE

    arguments = rendering.run_parameters(
        "flights-training",
        {
            "tuning_algorithm": algorithm,
            "tuning_algorithm_settings": json.dumps({"random_state": seed}),
            "tuning_early_stopping": early_stopping,
            "tuning_parallel_trials": 1,
            **budget,
        },
    )
    hyperparameters = {name: arguments[name] for name in TRAINING_CODE["hyperparameter_types"]}
    arguments.update(
        TRAINING_CODE,
        hyperparameters=hyperparameters,
        platform="local",
        data=features,
        tuning_trials=trials_dir,
    )
    preferred = STAGE.variants(STAGE.settings(arguments))[0]  # what the embedded platform runs
    return STAGE.run_local(preferred.settings)


def trial_seconds_to(trials: list[dict], threshold: float) -> tuple[float, bool]:
    """Summed trial seconds up to the first trial at or above ``threshold``, and whether one got there."""
    spent = 0.0
    for trial in trials:
        spent += trial["seconds"]
        if trial["objective"] is not None and trial["objective"] >= threshold:
            return spent, True
    return spent, False


def run(features_uri: str | None, seeds: list[int], arms: list[str], budget: dict, tolerance: float) -> dict:
    with tempfile.TemporaryDirectory(prefix="kfstack-tuning-") as tmp:
        features = features_uri or build_features(tmp)
        runs: dict[str, dict[int, list[dict]]] = {arm: {} for arm in arms}
        for seed in seeds:  # seed-major, so drift in machine load hits every arm alike
            for arm, algorithm, early_stopping in ARMS:
                if arm not in arms:
                    continue
                trials_dir = os.path.join(tmp, f"{arm}-{seed}")
                result = tune(features, trials_dir, algorithm, early_stopping, seed, budget)
                runs[arm][seed] = trials_of(trials_dir)
                print(f"{arm} seed {seed}: best {result.metrics['tuning_metrics']}", flush=True)
    # "The best found by either": the compared arms' best (every arm's, when one of them is not run).
    judged = [arm for arm in COMPARED if arm in runs] if all(arm in runs for arm in COMPARED) else list(runs)
    best = max(t["objective"] or 0.0 for arm in judged for trials in runs[arm].values() for t in trials)
    threshold = best * (1 - tolerance)
    figures: dict[str, dict] = {}
    for arm, per_seed in runs.items():
        reached = {seed: trial_seconds_to(trials, threshold) for seed, trials in per_seed.items()}
        figures[arm] = {
            "trial_seconds_to_good": {seed: round(seconds, 1) for seed, (seconds, _) in reached.items()},
            "got_there": {seed: ok for seed, (_, ok) in reached.items()},
            "mean_trial_seconds_to_good": round(statistics.mean(s for s, _ in reached.values()), 1),
            "total_trial_seconds": {
                seed: round(sum(t["seconds"] for t in trials), 1) for seed, trials in per_seed.items()
            },
            "best_auc": {
                seed: max(t["objective"] or 0.0 for t in trials) for seed, trials in per_seed.items()
            },
            "early_stopped": {
                seed: sum(t["status"] == "EarlyStopped" for t in trials) for seed, trials in per_seed.items()
            },
            "trials": per_seed,
        }
    result = {
        "benchmark": "tuning_efficiency",
        "command": (
            f"python -m benchmarks.tuning_efficiency --seeds {' '.join(map(str, seeds))} "
            f"--arms {' '.join(arms)} --max-trials {budget['tuning_max_trials']} "
            f"--trial-epochs {budget['tuning_trial_epochs']} --tolerance {tolerance}"
        ),
        "machine": machine_facts(),
        "budget": budget,
        "best_auc_any_arm": best,
        "threshold": round(threshold, 5),
        "arms": figures,
    }
    if all(arm in figures for arm in COMPARED):
        tpe_medianstop, random_search = (figures[arm]["mean_trial_seconds_to_good"] for arm in COMPARED)
        ratio = tpe_medianstop / random_search
        result.update(
            ratio_tpe_medianstop_to_random=round(ratio, 3),
            goal=f"tpe+medianstop <= {GOAL_RATIO} x random",
            meets_goal=ratio <= GOAL_RATIO,
        )
    return result


def trials_of(trials_dir: str) -> list[dict]:
    """The run's trials in the order they were created, from its journal."""
    from kfstack.components.tuning.hyperparameter_tuning.stage import STATE_DIR
    from kfstack.tuning.local_tuner import JOURNAL_FILE

    with open(os.path.join(trials_dir, STATE_DIR, JOURNAL_FILE), encoding="utf-8") as f:
        entries = [json.loads(line) for line in f]
    finished = [e["trial"] for e in entries if e["event"] == "finished"]
    return [
        {key: t[key] for key in ("name", "parameters", "status", "objective", "seconds", "history")}
        for t in sorted(finished, key=lambda t: t["name"])
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--features-uri", default=None)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    names = [arm for arm, _, _ in ARMS]
    parser.add_argument("--arms", nargs="+", default=names, choices=names)
    parser.add_argument("--max-trials", type=int, default=12)
    parser.add_argument("--trial-epochs", type=int, default=6)
    parser.add_argument("--tolerance", type=float, default=0.005, help="relative distance to the best AUC")
    args = parser.parse_args(argv)
    # The Kubernetes defaults of the tuning step (medianstop from the 2nd epoch once 3 trials
    # succeeded), not the embedded run's smaller LOCAL_BUDGET: six epochs leave early stopping
    # four epochs to save.
    budget = {"tuning_max_trials": args.max_trials, "tuning_trial_epochs": args.trial_epochs}
    result = run(args.features_uri, args.seeds, args.arms, budget, args.tolerance)
    write_result(result)
    summary = {k: v for k, v in result.items() if k != "arms"}
    summary["arms"] = {
        arm: {k: v for k, v in figures.items() if k != "trials"} for arm, figures in result["arms"].items()
    }
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
