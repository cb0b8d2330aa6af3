"""Benchmark: PyTorch trainer throughput, 1 process x 1 thread, 1 x 2 threads, 2 x 1 (DDP, gloo),
and, on a machine with CUDA, one replica on one GPU.

All layouts run the real trainer through the local PyTorchJob launcher on the same feature
shards with the same *global* batch, and report training samples/s (validation and export
excluded, as the trainer measures it), seconds and cost per epoch as the training step reports
them (locally: the machine at the ``cpu`` pool's nominal price, whatever the replica count).
Goal (issue: the flights training pipeline runs end to end): 2 x 1 >= 0.95 x the 1 x 2 figure.
Scaling efficiency: samples/s with N replicas ÷ (N × one replica's), from 1 x 1 and 2 x 1
(one thread per replica).

1 GPU vs the CPU pool (only where ``torch.cuda.is_available()``): a ``1gpu`` layout, one replica
on ``cuda:0`` (bf16 autocast, as the trainer does on a GPU), runs interleaved with the CPU layouts,
which are then kept off the GPU (``CUDA_VISIBLE_DEVICES=""`` for their replicas). It reports the
GPU's samples/s ÷ the 2 x 1 and the 1 x 1 layouts', and each one's cost per epoch on its node pool
at the profile's nominal price: a one-GPU pod's share of a node of the training step's default
GPU pool, one ``cpu`` pod per CPU replica (``node_pools.yaml``). Without CUDA the GPU layout is
skipped and the result says so.

    python -m benchmarks.ddp_scaling [--features-uri DIR] [--epochs 2] [--batch-size 1024]

Without ``--features-uri`` the feature job first runs on the full default data (4 shards).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import tempfile
from collections.abc import Iterator

from benchmarks.common import machine_facts, train_layout, write_result
from kfstack.kubernetes import node_pools
from kfstack.training.settings import (
    COST_PER_EPOCH,
    PRICE_PER_HOUR,
    PYTORCH,
    SAMPLES_PER_SECOND_PER_REPLICA,
    SECONDS_PER_EPOCH,
)
from kfstack.training.throughput import cost_metrics, scaling_efficiency
from kfstack_examples.flights.training.settings import METRICS_FILE

GOAL_RATIO = 0.95
LAYOUTS = (("1x1", 1, 1), ("1x2", 1, 2), ("2x1", 2, 1))  # (name, processes, threads each), on CPU
# One replica on cuda:0, where this machine has CUDA (one CPU thread: the steps run on the GPU).
GPU_LAYOUT = ("1gpu", 1, 1)
GPU = GPU_LAYOUT[0]
# Replica count -> the layout of that many one-thread replicas: the scaling-efficiency series.
ONE_THREAD_REPLICAS = {1: "1x1", 2: "2x1"}
# The CPU layouts the GPU replica is compared with: the CPU pool's two replicas, and one.
GPU_BASELINES = ("2x1", "1x1")
CUDA_VISIBLE_DEVICES = "CUDA_VISIBLE_DEVICES"


def build_features(tmp: str) -> str:
    from kfstack_examples.flights.features_job.job import FeatureJobConfig, run_feature_job

    features = os.path.join(tmp, "features")
    run_feature_job(
        FeatureJobConfig(output_uri=features, quarantine_uri=os.path.join(tmp, "q"), num_shards=4)
    )
    return features


def run(features_uri: str | None, epochs: int, batch_size: int, repeats: int) -> dict:
    gpu = cuda_available()
    layouts = (*LAYOUTS, GPU_LAYOUT) if gpu else LAYOUTS
    with tempfile.TemporaryDirectory(prefix="kfstack-ddp-") as tmp:
        features = features_uri or build_features(tmp)
        figures: dict[str, list[float]] = {name: [] for name, _, _ in layouts}
        # The training step's whole report of each layout's fastest repeat.
        reports: dict[str, dict[str, float]] = {}
        # Interleaved repeats, so drift in machine load hits every layout alike.
        for repeat in range(repeats):
            for name, processes, threads in layouts:
                out = os.path.join(tmp, f"{name}-{repeat}")
                # On a GPU machine a CPU layout's replicas must not see it: each trainer would take
                # cuda:<local rank> (2 x 1: a cuda:1 that one GPU lacks). Without CUDA: no change.
                with gpus_hidden(gpu and name != GPU):
                    metrics = train_layout(
                        features,
                        out,
                        framework=PYTORCH,
                        workers=processes,
                        threads=threads,
                        epochs=epochs,
                        batch_size=batch_size,
                    )
                check_device(name, trained_device(os.path.join(out, "model")))
                figures[name].append(metrics["samples_per_second"])
                if metrics["samples_per_second"] >= max(figures[name]):
                    reports[name] = metrics
    best = {name: max(values) for name, values in figures.items()}
    ratio = best["2x1"] / best["1x2"]
    efficiency = {
        str(replicas): round(scaling_efficiency(best[name], replicas, best[ONE_THREAD_REPLICAS[1]]), 3)
        for replicas, name in ONE_THREAD_REPLICAS.items()
    }
    if gpu:  # a GPU pod's price, not this machine's as a ``cpu`` node
        reports[GPU] = repriced(reports[GPU], pods_price_per_hour(gpu_pool(), 1))
    result = {
        "benchmark": "ddp_scaling",
        "command": (
            f"python -m benchmarks.ddp_scaling --epochs {epochs}"
            f" --batch-size {batch_size} --repeats {repeats}"
        ),
        "machine": machine_facts(),
        "global_batch": batch_size,
        "epochs": epochs,
        "samples_per_second_all_repeats": figures,
        "samples_per_second_best": {k: round(v) for k, v in best.items()},
        "ratio_2x1_to_1x2": round(ratio, 3),
        "scaling_efficiency_one_thread_replicas": efficiency,
        "best_repeat": {name: per_epoch(report) for name, report in reports.items()},
        "gpu": gpu_note(gpu),
        "goal": f"2x1 >= {GOAL_RATIO} x 1x2",
        "meets_goal": ratio >= GOAL_RATIO,
    }
    if gpu:
        result["gpu_vs_cpu_pool"] = gpu_vs_cpu_pool(best, reports)
    return result


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


@contextlib.contextmanager
def gpus_hidden(hide: bool) -> Iterator[None]:
    """While inside, with ``hide``: ``CUDA_VISIBLE_DEVICES=""`` in this process's env, which the
    replicas the local launcher starts inherit, so that their trainers run on the CPU."""
    if not hide:
        yield
        return
    previous = os.environ.get(CUDA_VISIBLE_DEVICES)
    os.environ[CUDA_VISIBLE_DEVICES] = ""
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(CUDA_VISIBLE_DEVICES, None)
        else:
            os.environ[CUDA_VISIBLE_DEVICES] = previous


def trained_device(model_uri: str) -> str:
    """The device type (``cuda``, ``cpu``) the trainer wrote in its ``training_metrics.json``."""
    with open(os.path.join(model_uri, METRICS_FILE), encoding="utf-8") as f:
        return str(json.load(f).get("device", ""))


def check_device(layout: str, device: str) -> None:
    """Raises RuntimeError when ``layout`` trained elsewhere than it is named for: its figures
    would be compared as the wrong hardware's."""
    expected = "cuda" if layout == GPU else "cpu"
    if device != expected:
        raise RuntimeError(f"layout {layout} trained on {device or 'an unreported device'}, not {expected}")


def gpu_pool() -> str:
    """The training step's default GPU node pool (its ``gpu_pool`` parameter)."""
    from kfstack.kubernetes.placement import TrainingPlacement

    return TrainingPlacement().node_pool


def pods_price_per_hour(pool: str, pods: int) -> float | None:
    """What ``pods`` pods of node pool ``pool`` cost per hour (``node_pools.yaml``: a one-GPU pod
    is its share of a GPU node, a ``cpu`` pod a whole node); None when the pool has no price."""
    return node_pools.get_profile(pool).price_per_hour(pods)


def repriced(report: dict[str, float], price_per_hour: float | None) -> dict[str, float]:
    """``report`` with its price and cost per epoch at ``price_per_hour`` (None: none) instead of
    the ones the training step reported."""
    kept = {name: value for name, value in report.items() if name not in (PRICE_PER_HOUR, COST_PER_EPOCH)}
    return {**kept, **cost_metrics(report[SECONDS_PER_EPOCH], price_per_hour)}


def gpu_vs_cpu_pool(best: dict[str, float], reports: dict[str, dict[str, float]]) -> dict:
    """The GPU replica against the CPU layouts of :data:`GPU_BASELINES`: samples/s ratios (GPU ÷
    layout) and, on each one's node pool, price per hour, cost per epoch and the GPU's cost ÷ the
    layout's (None without a price).

    Args:
        best: Layout -> its best samples/s.
        reports: Layout -> the report of its best repeat, the GPU's priced at a GPU pod's price.
    """
    processes = {name: count for name, count, _ in LAYOUTS}
    pooled = {
        GPU: reports[GPU],
        **{
            name: repriced(reports[name], pods_price_per_hour(node_pools.CPU_POOL, processes[name]))
            for name in GPU_BASELINES
        },
    }
    costs = {name: report.get(COST_PER_EPOCH) for name, report in pooled.items()}
    gpu_cost = costs[GPU]
    return {
        "gpu_pool": gpu_pool(),
        "device": cuda_device_name(),
        "samples_per_second_ratio": {name: round(best[GPU] / best[name], 3) for name in GPU_BASELINES},
        "pool_price_per_hour": {name: report.get(PRICE_PER_HOUR) for name, report in pooled.items()},
        "pool_cost_per_epoch": costs,
        "pool_cost_ratio": {name: cost_ratio(gpu_cost, costs[name]) for name in GPU_BASELINES},
    }


def cost_ratio(cost: float | None, other: float | None) -> float | None:
    """``cost`` ÷ ``other``; None when either is unknown (or ``other`` is 0)."""
    if cost is None or not other:
        return None
    return round(cost / other, 2)


def cuda_device_name() -> str:
    import torch

    return torch.cuda.get_device_name(0)


def per_epoch(report: dict[str, float]) -> dict[str, float | None]:
    """A layout's per-epoch figures as the training step reported them (cost: None without a
    price for the ``cpu`` pool; the GPU layout's at a GPU pod's price, :func:`repriced`)."""
    return {
        SECONDS_PER_EPOCH: round(report[SECONDS_PER_EPOCH], 3),
        SAMPLES_PER_SECOND_PER_REPLICA: round(report[SAMPLES_PER_SECOND_PER_REPLICA]),
        PRICE_PER_HOUR: report.get(PRICE_PER_HOUR),
        COST_PER_EPOCH: report.get(COST_PER_EPOCH),
    }


def gpu_note(gpu: bool) -> str:
    """Where the 1 GPU vs CPU-pool comparison stands."""
    if gpu:
        return "1 GPU layout run (1gpu): see gpu_vs_cpu_pool"
    return "no GPU on this machine: the 1 GPU vs CPU pool comparison was not run"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--features-uri", default=None)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    result = run(args.features_uri, args.epochs, args.batch_size, args.repeats)
    write_result(result)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
