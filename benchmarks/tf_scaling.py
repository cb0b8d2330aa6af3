"""Benchmark: TensorFlow trainer throughput, MultiWorkerMirroredStrategy 2 workers vs 1 worker.

Both layouts run the real trainer through the local TFJob launcher (TF_CONFIG on loopback, gRPC
collectives) on the same feature shards with the same *global* batch, one intra-op thread per
process, and report training samples/s as the trainer measures it (validation and export
excluded). The issue asks for the figures; there is no fixed goal.

    python -m benchmarks.tf_scaling [--features-uri DIR] [--epochs 2] [--batch-size 1024]

Without ``--features-uri`` the feature job first runs on the full default data (4 shards).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile

from benchmarks.common import machine_facts, train_layout, write_result
from benchmarks.ddp_scaling import build_features

LAYOUTS = (("1 worker", 1), ("2 workers", 2))


def run(features_uri: str | None, epochs: int, batch_size: int, repeats: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="kfstack-tf-") as tmp:
        features = features_uri or build_features(tmp)
        figures: dict[str, list[float]] = {name: [] for name, _ in LAYOUTS}
        for repeat in range(repeats):  # interleaved, so load drift hits both layouts alike
            for name, workers in LAYOUTS:
                out = os.path.join(tmp, f"{workers}-{repeat}")
                metrics = train_layout(
                    features,
                    out,
                    framework="tensorflow",
                    workers=workers,
                    threads=1,
                    epochs=epochs,
                    batch_size=batch_size,
                )
                figures[name].append(metrics["samples_per_second"])
    best = {name: max(values) for name, values in figures.items()}
    return {
        "benchmark": "tf_scaling",
        "command": (
            f"python -m benchmarks.tf_scaling --epochs {epochs} --batch-size {batch_size} --repeats {repeats}"
        ),
        "machine": machine_facts(),
        "global_batch": batch_size,
        "epochs": epochs,
        "threads_per_worker": 1,
        "samples_per_second_all_repeats": figures,
        "samples_per_second_best": {k: round(v) for k, v in best.items()},
        "ratio_2_to_1": round(best["2 workers"] / best["1 worker"], 3),
    }


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
