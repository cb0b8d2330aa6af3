"""Benchmark (GPU machines only): TensorFlow trainer samples/s with bf16 on one GPU, real input
path vs synthetic tensors already on the GPU.

*Real*: the trainer itself (``train_locally``, one worker) on feature shards:
Parquet -> NumPy -> ``tf.data`` (shuffle, batch, prefetch) -> the ``mixed_bfloat16`` Keras model,
50 steps per ``tf.function`` call. *Synthetic*: the same model, optimiser, policy and step loop fed
one batch of random tensors that already live on the GPU: the ceiling the input path could
reach. Goal (issue: distributed training on Kubernetes GPU node pools): real >= 90 % of synthetic.

    python -m benchmarks.gpu_throughput_tf --features-uri DIR [--batch-size 4096] [--epochs 4]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

from benchmarks.gpu_throughput import GOAL_RATIO, steady_samples_per_second


def synthetic_samples_per_second(features_uri: str, batch_size: int, steps: int) -> float:
    import keras
    import tensorflow as tf

    from kfstack_examples.flights.feature_spec import FeatureSpec
    from kfstack_examples.flights.training.architecture import ModelConfig
    from kfstack_examples.flights.training.tensorflow_model import build_classifier

    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    spec = FeatureSpec.load(features_uri)
    model = build_classifier(ModelConfig(tuple(spec.cardinalities), len(spec.numeric)), seed=0)
    optimizer = keras.optimizers.Adam(learning_rate=0.003)
    with tf.device("/GPU:0"):
        categorical = tf.stack(
            [tf.random.uniform((batch_size,), 0, c, dtype=tf.int64) for c in spec.cardinalities], axis=1
        )
        numeric = tf.random.normal((batch_size, len(spec.numeric)))
        labels = tf.cast(tf.random.uniform((batch_size,), 0, 2, dtype=tf.int32), tf.float32)

    @tf.function
    def run_steps(count):
        for _ in tf.range(count):
            with tf.GradientTape() as tape:
                logits = tf.squeeze(tf.cast(model([categorical, numeric], training=True), tf.float32), -1)
                loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits))
            gradients = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(gradients, model.trainable_variables, strict=False))
        return loss

    run_steps(tf.constant(20)).numpy()  # warm-up: tracing, kernels
    started = time.perf_counter()
    done = 0
    while done < steps:  # the trainer's 50 steps per call
        run_steps(tf.constant(50)).numpy()
        done += 50
    return done * batch_size / (time.perf_counter() - started)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--features-uri", required=True)
    parser.add_argument("--batch-size", type=int, default=4096)
    parser.add_argument("--epochs", type=int, default=4)
    args = parser.parse_args(argv)

    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        sys.exit("no GPU visible to TensorFlow: this benchmark needs a GPU machine")
    from benchmarks.common import machine_facts, write_result
    from kfstack_examples.flights.pipelines.steps import train_locally
    from kfstack_examples.flights.training.settings import TrainingSettings

    with tempfile.TemporaryDirectory(prefix="kfstack-gpu-tf-") as tmp:
        real, _ = train_locally(
            TrainingSettings(
                framework="tensorflow",
                epochs=args.epochs,
                workers=1,
                batch_size=args.batch_size,
                learning_rate=0.003,
                max_restarts=0,
            ),
            features_uri=args.features_uri,
            model_uri=os.path.join(tmp, "model"),
            logs_uri=os.path.join(tmp, "logs"),
        )
        with open(os.path.join(tmp, "model", "training_metrics.json"), encoding="utf-8") as f:
            trained = json.load(f)
    synthetic = synthetic_samples_per_second(args.features_uri, args.batch_size, steps=300)
    steady = steady_samples_per_second(trained["history"])
    ratio = steady / synthetic
    details = tf.config.experimental.get_device_details(gpus[0])
    result = {
        "benchmark": "gpu_throughput_tf",
        "command": (
            f"python -m benchmarks.gpu_throughput_tf --batch-size {args.batch_size} --epochs {args.epochs}"
        ),
        "machine": {
            **machine_facts(),
            "gpu": details.get("device_name", "GPU"),
            "tensorflow": tf.__version__,
        },
        "precision": "mixed_bfloat16",
        "batch_size": args.batch_size,
        "trainer_device": trained["device"],
        "real_input_samples_per_second_all_epochs": round(real["report.samples_per_second"]),
        "real_input_samples_per_second_after_first_epoch": round(steady),
        "synthetic_on_gpu_samples_per_second": round(synthetic),
        "ratio_real_to_synthetic": round(ratio, 3),
        "val_auc": round(real["val_auc"], 4),
        "goal": f"real >= {GOAL_RATIO} x synthetic",
        "meets_goal": ratio >= GOAL_RATIO,
    }
    write_result(result)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
