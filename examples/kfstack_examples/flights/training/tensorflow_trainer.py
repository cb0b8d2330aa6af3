"""The TensorFlow trainer: what each TFJob pod (or local replica process) runs.

    python -m kfstack_examples.flights.training.tensorflow_trainer \\
        --features-uri F --model-uri M --checkpoint-uri C [--epochs 4] [--batch-size 1024] \\
        [--learning-rate 0.003] [--seed 42]

Same data contract, feature spec, network (:mod:`kfstack_examples.flights.training.architecture`), metrics and
exported interface as the PyTorch trainer. The topology comes from ``TF_CONFIG``
(:mod:`kfstack.training.tf_config`):

- **No TF_CONFIG**: one process.
- **Workers only**: ``MultiWorkerMirroredStrategy``, synchronous all-reduce. Each worker reads
  only its own train shards (round robin by worker index); ``--batch-size`` is the global batch,
  split evenly; every worker runs the same number of steps, the smallest worker's, computed from
  the shards' Parquet footers (no collective needed to agree).
- **Chief + workers + PS**: ``ParameterServerStrategy``, asynchronous. The chief coordinates
  (``ClusterCoordinator``) and schedules steps of ``--batch-size`` rows on the workers; workers
  and parameter servers run a ``tf.distribute.Server`` until the chief is done (a TFJob then
  succeeds on the chief's exit). The input runs on the workers from a dataset function the
  coordinator ships them, which cannot tell workers apart: every worker draws its own random
  order over the whole train split, the pattern TensorFlow's parameter-server guide uses.

After each epoch the chief (worker 0 under MWMS) scores the whole validation split, prints a
Katib metric line (validation metrics, then the epoch's seconds and samples/s) and writes a
checkpoint (model and optimizer variables, atomic, any fsspec URI); on start every process
resumes from the latest one. At the end the chief exports ``model.onnx`` with Keras' ONNX
export, checks it against Keras with onnxruntime, copies the feature spec and writes
``training_metrics.json``. bf16 (``mixed_bfloat16``) on GPU.
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import math
import os
import sys
import tempfile
import time

import fsspec
import numpy as np

from kfstack.api import InvalidParameterError, TrainingFailedError, report_progress, write_report
from kfstack.api.training import (
    PS,
    WORKER,
    TFTask,
    accuracy,
    list_checkpoints,
    load_checkpoint,
    log_loss,
    numeric_report,
    read_split,
    roc_auc,
    rows_per_rank,
    save_checkpoint,
    termination_message_on_failure,
    throughput,
    to_bytes,
    tuning_trial,
)
from kfstack_examples.flights.feature_spec import FeatureSpec, copy_model_feature_files
from kfstack_examples.flights.training.architecture import ONNX_INPUTS, ModelConfig
from kfstack_examples.flights.training.settings import (
    METRICS_FILE,
    MODEL_FILE,
    metric_line,
    parse_trainer_args,
)

logger = logging.getLogger("kfstack.train_tensorflow")

ONNX_TOLERANCE = 1e-4
CHECKPOINTS_KEPT = 2
STEPS_PER_CALL = 50  # training steps per tf.function call: fewer Python round trips
SCORING_BATCH = 65536
GRADIENT_PACK_BYTES = 32 * 2**20  # larger than all gradients together


class Trainer:
    """State shared by the topologies: data, model, optimizer, checkpoints, history."""

    def __init__(self, args: argparse.Namespace, task: TFTask, strategy):
        import keras
        import tensorflow as tf

        from kfstack_examples.flights.training.tensorflow_model import build_classifier

        self.args, self.task, self.strategy = args, task, strategy
        self.spec = FeatureSpec.load(args.features_uri)
        self.config = ModelConfig(tuple(self.spec.cardinalities), len(self.spec.numeric))
        self.gpu = bool(tf.config.list_physical_devices("GPU"))
        if self.gpu:
            # bf16 keeps fp32's exponent range: no loss scaling needed (unlike fp16).
            keras.mixed_precision.set_global_policy("mixed_bfloat16")
        keras.utils.set_random_seed(args.seed)  # identical initial weights everywhere
        with strategy.scope():
            self.classifier = build_classifier(self.config, args.seed)
            self.optimizer = keras.optimizers.Adam(learning_rate=args.learning_rate)
            self.optimizer.build(self.classifier.trainable_variables)
        self.history: list[dict[str, float]] = []
        self.train_seconds, self.samples, self.start_epoch = 0.0, 0, 1
        self.validation: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # the chief's only

    # -- checkpoints ---------------------------------------------------------------------------

    def resume(self) -> None:
        from kfstack_examples.flights.training.tensorflow_model import restore_state

        found = list_checkpoints(self.args.checkpoint_uri)
        if not found:
            return
        epoch = found[-1][0]
        payload = np.load(io.BytesIO(load_checkpoint(self.args.checkpoint_uri, epoch)))
        restore_state(self.classifier, self.optimizer, {k: payload[k] for k in payload.files if "/" in k})
        meta = json.loads(str(payload["meta"]))
        self.history, self.train_seconds, self.samples = (
            meta["history"],
            meta["train_seconds"],
            meta["samples"],
        )
        self.start_epoch = epoch + 1
        logger.info("%s %d: resumed from checkpoint of epoch %d", self.task.task_type, self.task.index, epoch)

    def save(self, epoch: int) -> None:
        from kfstack_examples.flights.training.tensorflow_model import weights_state

        state = weights_state(self.classifier, self.optimizer)
        state["meta"] = np.asarray(
            json.dumps(
                {
                    "epoch": epoch,
                    "history": self.history,
                    "train_seconds": self.train_seconds,
                    "samples": self.samples,
                }
            )
        )
        save_checkpoint(
            self.args.checkpoint_uri,
            epoch,
            to_bytes(lambda s, f: np.savez(f, **s), state),
            keep=CHECKPOINTS_KEPT,
        )

    # -- per epoch -----------------------------------------------------------------------------

    def step_fn(self, global_batch: int):
        import tensorflow as tf

        classifier, optimizer = self.classifier, self.optimizer

        def step(inputs):
            (categorical, numeric), labels = inputs
            with tf.GradientTape() as tape:
                logits = tf.squeeze(
                    tf.cast(classifier([categorical, numeric], training=True), tf.float32), -1
                )
                per_example = tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits)
                loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
            gradients = tape.gradient(loss, classifier.trainable_variables)
            optimizer.apply_gradients(zip(gradients, classifier.trainable_variables, strict=False))
            return loss

        return step

    def validate_and_checkpoint(self, epoch: int, epoch_seconds: float, epoch_samples: int) -> None:
        """Chief only: scores the validation split, prints the Katib line, checkpoints."""
        self.train_seconds += epoch_seconds
        self.samples += epoch_samples
        if not self.task.is_chief:
            return
        if self.validation is None:
            self.validation = read_split(self.spec, f"{self.args.features_uri.rstrip('/')}/validation", 0, 1)
        categorical, numeric, labels = self.validation
        probabilities = self.predict(categorical, numeric)
        scores = {
            "val_auc": roc_auc(labels, probabilities),
            "val_log_loss": log_loss(labels, probabilities),
            "val_accuracy": accuracy(labels, probabilities),
            "val_rows": float(len(labels)),
            "train_seconds": epoch_seconds,
            "train_samples": float(epoch_samples),
        }
        self.history.append({"epoch": epoch, **scores})
        epoch_throughput = throughput(epoch_seconds, epoch_samples, epochs=1, replicas=self.task.num_workers)
        print(metric_line(epoch, {**scores, **epoch_throughput}), flush=True)
        report_progress("epoch", epoch, self.args.epochs)
        self.save(epoch)

    def predict(self, categorical: np.ndarray, numeric: np.ndarray) -> np.ndarray:
        import tensorflow as tf

        out = []
        for start in range(0, len(categorical), SCORING_BATCH):
            logits = self.classifier(
                [categorical[start : start + SCORING_BATCH], numeric[start : start + SCORING_BATCH]],
                training=False,
            )
            out.append(tf.sigmoid(tf.cast(logits, tf.float32)).numpy().reshape(-1))
        return np.concatenate(out) if out else np.empty(0, np.float32)

    # -- the end -------------------------------------------------------------------------------

    def finish(self) -> dict:
        """Chief only: exports the model, writes ``training_metrics.json``; returns it. A tuning
        trial's result is its metric lines: nothing keeps its model, so none is written."""
        keeps_model = not tuning_trial()
        difference = math.nan
        if keeps_model:
            difference = export_onnx(self.classifier, self.config, self.spec, self.validation, self.args)
        last = self.history[-1] if self.history else {}
        result = {
            "val_auc": last.get("val_auc", math.nan),
            "val_log_loss": last.get("val_log_loss", math.nan),
            "val_accuracy": last.get("val_accuracy", math.nan),
            # history covers every epoch train_seconds sums, those of earlier attempts too.
            **throughput(self.train_seconds, self.samples, len(self.history), self.task.num_workers),
            "epochs": float(self.args.epochs),
            "world_size": float(self.task.num_workers),
            "topology": topology_name(self.task),
            "resumed_from_epoch": float(self.start_epoch - 1),
            "onnx_max_abs_difference": difference,
            "history": self.history,
            "device": "gpu" if self.gpu else "cpu",
        }
        if keeps_model:
            with fsspec.open(f"{self.args.model_uri.rstrip('/')}/{METRICS_FILE}", "w") as f:
                json.dump(result, f, indent=2)
        # Run as a team's code by the generic training step: its numbers are the step's report.
        write_report(numeric_report(result))
        return result


def topology_name(task: TFTask) -> str:
    if not task.is_distributed:
        return "single"
    return "parameter_server" if task.has_parameter_servers else "mwms"


def export_onnx(
    classifier, config: ModelConfig, spec: FeatureSpec, sample, args: argparse.Namespace
) -> float:
    """Writes ``model.onnx`` and returns its max abs difference to Keras on validation rows.

    The trained weights go into a fresh float32 copy built outside any distribution strategy,
    so the exported graph holds plain constants and full-precision math.

    Raises:
        TrainingFailedError: onnxruntime disagrees with Keras beyond :data:`ONNX_TOLERANCE`.
    """
    import keras
    import onnxruntime

    from kfstack_examples.flights.training.tensorflow_model import build_classifier, serving_model

    keras.mixed_precision.set_global_policy("float32")
    copy = build_classifier(config, args.seed)
    copy.set_weights([np.asarray(w, dtype=np.float32) for w in classifier.get_weights()])
    serving = serving_model(copy)
    categorical, numeric, _ = sample
    n = min(len(categorical), 512)
    if n < 2:
        raise TrainingFailedError("the validation split needs at least 2 rows to export the model")
    expected = serving([categorical[:n], numeric[:n]], training=False).numpy()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, MODEL_FILE)
        serving.export(path, format="onnx", verbose=False)
        session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
        names = [i.name for i in session.get_inputs()]
        if sorted(names) != sorted(ONNX_INPUTS):
            raise TrainingFailedError(f"exported inputs {names}, expected {list(ONNX_INPUTS)}")
        got = session.run(None, {"categorical": categorical[:n], "numeric": numeric[:n]})[0]
        difference = float(np.max(np.abs(got.reshape(-1) - expected.reshape(-1))))
        if difference > ONNX_TOLERANCE:
            raise TrainingFailedError(
                f"ONNX export differs from Keras by {difference:.2e} (> {ONNX_TOLERANCE:.0e})"
            )
        fs, model_dir = fsspec.core.url_to_fs(args.model_uri)
        fs.makedirs(model_dir, exist_ok=True)
        fs.put_file(path, f"{model_dir.rstrip('/')}/{MODEL_FILE}")
    copy_model_feature_files(args.features_uri, args.model_uri)
    logger.info("exported %s (max |onnx - keras| = %.2e)", MODEL_FILE, difference)
    return difference


def train_synchronous(args: argparse.Namespace, task: TFTask) -> dict | None:
    """One process, or MultiWorkerMirroredStrategy over the workers of ``TF_CONFIG``."""
    import tensorflow as tf

    if task.is_distributed:
        # One all-reduce per step for all gradients (the model's ~20 tensors are small): per
        # tensor, the collectives' fixed cost dominated the step on CPU.
        strategy = tf.distribute.MultiWorkerMirroredStrategy(
            communication_options=tf.distribute.experimental.CommunicationOptions(
                bytes_per_pack=GRADIENT_PACK_BYTES
            )
        )
        rank, world = task.index, task.num_workers
    else:
        strategy = tf.distribute.get_strategy()  # the default: no distribution
        rank, world = 0, 1
    trainer = Trainer(args, task, strategy)
    trainer.resume()
    train_uri = f"{args.features_uri.rstrip('/')}/train"
    categorical, numeric, labels = read_split(trainer.spec, train_uri, rank, world)
    per_worker_batch = max(1, args.batch_size // world)
    steps = min(rows_per_rank(train_uri, world)) // per_worker_batch
    if steps < 1:
        raise InvalidParameterError(
            f"some worker has fewer train rows than its batch of {per_worker_batch}; lower batch_size"
        )
    logger.info(
        "worker %d of %d: %d train rows, %d steps/epoch of %d",
        rank,
        world,
        len(labels),
        steps,
        per_worker_batch,
    )

    def dataset_fn(context=None):
        dataset = tf.data.Dataset.from_tensor_slices(((categorical, numeric), labels))
        dataset = dataset.shuffle(len(labels), seed=args.seed + rank, reshuffle_each_iteration=True)
        return dataset.batch(per_worker_batch, drop_remainder=True).take(steps).prefetch(tf.data.AUTOTUNE)

    distributed = strategy.distribute_datasets_from_function(dataset_fn)
    step = trainer.step_fn(global_batch=per_worker_batch * world)

    @tf.function
    def run_steps(iterator, count):
        # No per-step reduce of the loss: under MWMS that is one more cross-worker collective
        # per step, for a value nobody reads.
        for _ in tf.range(count):
            strategy.run(step, args=(next(iterator),))

    for epoch in range(trainer.start_epoch, args.epochs + 1):
        iterator = iter(distributed)
        started = time.perf_counter()
        done = 0
        while done < steps:
            count = min(STEPS_PER_CALL, steps - done)
            run_steps(iterator, tf.constant(count))
            done += count
        trainer.validate_and_checkpoint(
            epoch, time.perf_counter() - started, steps * per_worker_batch * world
        )
    return trainer.finish() if task.is_chief else None


def train_parameter_server(args: argparse.Namespace, task: TFTask) -> dict | None:
    """ParameterServerStrategy: workers and PS serve; the chief coordinates."""
    import tensorflow as tf

    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    if task.task_type in (WORKER, PS):
        server = tf.distribute.Server(
            resolver.cluster_spec(),
            job_name=task.task_type,
            task_index=task.index,
            protocol=resolver.rpc_layer or "grpc",
            start=True,
        )
        logger.info("%s %d serving", task.task_type, task.index)
        server.join()  # until the job ends: the operator (or the local launcher) stops this process
        return None
    strategy = tf.distribute.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    trainer = Trainer(args, task, strategy)
    trainer.resume()
    categorical, numeric, labels = read_split(trainer.spec, f"{args.features_uri.rstrip('/')}/train", 0, 1)
    steps = len(labels) // args.batch_size
    if steps < 1:
        raise InvalidParameterError(f"the train split has fewer rows than one batch of {args.batch_size}")
    logger.info(
        "chief: %d train rows, %d steps/epoch of %d over %d workers",
        len(labels),
        steps,
        args.batch_size,
        task.num_workers,
    )

    def dataset_fn():
        dataset = tf.data.Dataset.from_tensor_slices(((categorical, numeric), labels))
        # No seed: each worker draws its own order (see the module docstring).
        return dataset.shuffle(min(len(labels), 100_000)).repeat().batch(args.batch_size, drop_remainder=True)

    per_worker = coordinator.create_per_worker_dataset(dataset_fn)
    step = trainer.step_fn(global_batch=args.batch_size)

    @tf.function
    def scheduled_step(iterator):
        return strategy.reduce(
            tf.distribute.ReduceOp.SUM, strategy.run(step, args=(next(iterator),)), axis=None
        )

    iterator = iter(per_worker)
    for epoch in range(trainer.start_epoch, args.epochs + 1):
        started = time.perf_counter()
        for _ in range(steps):
            coordinator.schedule(scheduled_step, args=(iterator,))
        coordinator.join()
        trainer.validate_and_checkpoint(epoch, time.perf_counter() - started, steps * args.batch_size)
    return trainer.finish()


def train(args: argparse.Namespace) -> dict | None:
    """Runs this process's part (see the module docstring); the chief returns its metrics."""
    task = TFTask.from_env()
    logger.info("%s %d, topology %s", task.task_type, task.index, topology_name(task))
    if task.has_parameter_servers:
        return train_parameter_server(args, task)
    return train_synchronous(args, task)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    return parse_trainer_args(argv, prog="python -m kfstack_examples.flights.training.tensorflow_trainer")


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("kfstack").setLevel(logging.INFO)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's C++ start-up chatter
    # A failed trial's output may be in Katib's metrics file: its error also goes to the pod.
    with termination_message_on_failure():
        train(parse_args(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
