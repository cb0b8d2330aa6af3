"""The digits example's training code: a team's Keras function, as distributed_training runs it.

``training_code="kfstack_examples.digits.trainer:train"``. It never imports kfstack: it reads
the splits at ``$KFSTACK_INPUT_URI``, trains an MLP over the 64 pixels under
``MultiWorkerMirroredStrategy`` when the TFJob's ``TF_CONFIG`` says it is one of several workers,
resumes from ``$KFSTACK_CHECKPOINT_URI`` after a restart (a path, or an object-store URI that
it mirrors a local checkpoint folder to with fsspec: TensorFlow opens no object store without
tensorflow-io), prints ``epoch=N val_accuracy=...
val_loss=...`` (Katib's StdOut format) every epoch, and on the chief (worker 0) exports the
trained network to ``$KFSTACK_MODEL_DIR/model.onnx``: the ``onnx`` format, which Triton serves.
Its signature declares the hyperparameters (the pipeline reads it without importing the module).
In a tuning trial (``$KFSTACK_TRIAL`` set) it exports nothing: nothing keeps a trial's model.
"""

from __future__ import annotations

import json
import os
from typing import Literal

PIXELS = 64
CLASSES = 10


def _load(uri: str, split: str):
    import numpy as np
    import pyarrow.dataset as ds

    table = ds.dataset(f"{uri.rstrip('/')}/{split}", format="parquet").to_table()
    pixels = np.stack([table.column(f"p{i}").to_numpy() for i in range(PIXELS)], axis=1)
    return (pixels / 16.0).astype("float32"), table.column("digit").to_numpy().astype("int64")


def _network(hidden_units: int, dropout: float, activation: str):
    import keras

    return keras.Sequential(
        [
            keras.Input(shape=(PIXELS,), name="pixels"),
            keras.layers.Dense(hidden_units, activation=activation),
            keras.layers.Dropout(dropout),
            keras.layers.Dense(CLASSES, activation="softmax", name="probabilities"),
        ]
    )


def _is_chief() -> bool:
    task = json.loads(os.environ.get("TF_CONFIG", "{}")).get("task", {})
    return task.get("type", "worker") in ("worker", "chief") and int(task.get("index", 0)) == 0


class _CheckpointStore:
    """Where the checkpoints outlive a replica: a path TensorFlow writes itself, or an
    object-store URI mirrored from a local folder (pulled at start, pushed after each save)."""

    def __init__(self, location: str) -> None:
        import tempfile

        import fsspec

        self.remote = "://" in location
        self.location = location
        self.directory = tempfile.mkdtemp() if self.remote else location
        if self.remote:
            self.fs, self.root = fsspec.core.url_to_fs(location)
            if self.fs.exists(self.root):
                for path in self.fs.ls(self.root, detail=False):
                    self.fs.get(path, os.path.join(self.directory, os.path.basename(path)))

    def push(self) -> None:
        """Mirrors the local folder to the URI: new files first, ``checkpoint`` (the index
        TensorFlow reads the latest from) last, so a reader never finds it ahead of its files."""
        if not self.remote:
            return
        names = sorted(os.listdir(self.directory), key=lambda name: name == "checkpoint")
        self.fs.makedirs(self.root, exist_ok=True)
        for name in names:
            self.fs.put_file(os.path.join(self.directory, name), f"{self.root.rstrip('/')}/{name}")
        # What the manager dropped locally (it keeps the newest two) goes from the store too.
        for path in self.fs.ls(self.root, detail=False):
            if os.path.basename(path.rstrip("/")) not in names:
                self.fs.rm(path)


def train(
    hidden_units: int = 64,
    dropout: float = 0.1,
    activation: Literal["relu", "tanh"] = "relu",
    epochs: int = 10,
    batch_size: int = 64,
    learning_rate: float = 0.003,
    seed: int = 7,
) -> None:
    """Trains with a custom loop over ``strategy.run`` (Keras 3's ``fit`` takes no multi-worker
    strategy): every worker reads its shard of each global batch, gradients are all-reduced.

    Args:
        hidden_units: The MLP's hidden layer width (tuning's when ``tune``).
        dropout: Dropout after the hidden layer (tuning's when ``tune``).
        activation: The hidden layer's activation (tuning's when ``tune``).
        epochs: Epochs of the final training.
        batch_size: Images per step, across the workers.
        learning_rate: Adam's step size.
        seed: Seeds the initialisation and the order of the images.
    """
    import tempfile

    import keras
    import numpy as np
    import tensorflow as tf

    keras.utils.set_random_seed(seed)
    data = os.environ["KFSTACK_INPUT_URI"]
    x, y = _load(data, "train")
    x_val, y_val = _load(data, "validation")
    several = bool(json.loads(os.environ.get("TF_CONFIG", "{}")).get("cluster"))
    strategy = tf.distribute.MultiWorkerMirroredStrategy() if several else tf.distribute.get_strategy()
    with strategy.scope():
        model = _network(hidden_units, dropout, activation)
        optimizer = keras.optimizers.Adam(learning_rate)
        done = tf.Variable(0, dtype=tf.int64, trainable=False)  # epochs finished, checkpointed
    per_row = keras.losses.SparseCategoricalCrossentropy(reduction="none")

    def dataset_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
        rows = tf.data.Dataset.from_tensor_slices((x, y)).shard(
            context.num_input_pipelines, context.input_pipeline_id
        )
        return rows.shuffle(len(x), seed=seed).repeat().batch(context.get_per_replica_batch_size(batch_size))

    batches = iter(strategy.distribute_datasets_from_function(dataset_fn))

    @tf.function
    def step() -> None:
        def replica_step(inputs):
            features, labels = inputs
            with tf.GradientTape() as tape:
                loss = tf.nn.compute_average_loss(
                    per_row(labels, model(features, training=True)), global_batch_size=batch_size
                )
            optimizer.apply_gradients(
                zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables, strict=True)
            )

        strategy.run(replica_step, args=(next(batches),))

    # Checkpoints: the chief writes where the step said (it outlives a replica); the other workers
    # must save too (the save is collective) and write to a scratch folder.
    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, done=done)
    shared = _CheckpointStore(os.environ.get("KFSTACK_CHECKPOINT_URI", "") or tempfile.mkdtemp())
    manager = tf.train.CheckpointManager(
        checkpoint, shared.directory if _is_chief() else tempfile.mkdtemp(), max_to_keep=2
    )
    latest = tf.train.latest_checkpoint(shared.directory)
    if latest:
        checkpoint.restore(latest)

    def report(epoch: int) -> None:
        probabilities = model(x_val, training=False).numpy()
        accuracy = float(np.mean(probabilities.argmax(axis=1) == y_val))
        loss = float(np.mean(per_row(y_val, probabilities).numpy()))
        print(f"epoch={epoch} val_accuracy={accuracy:.4f} val_loss={loss:.4f}", flush=True)

    first = int(done.numpy())
    for epoch in range(first, epochs):
        for _ in range(max(1, len(x) // batch_size)):
            step()
        done.assign(epoch + 1)
        manager.save()
        if _is_chief():
            shared.push()
        report(epoch + 1)
    if first >= epochs:
        report(first)  # resumed after the last epoch: its figures once more, for the step
    if _is_chief() and not os.environ.get("KFSTACK_TRIAL"):  # a tuning trial: nothing keeps its model
        # A plain copy outside the strategy: exporting reads no mirrored variable collectively.
        plain = _network(hidden_units, dropout, activation)
        plain.set_weights([np.asarray(w) for w in model.get_weights()])
        plain(x_val[:1])  # Keras exports a model that has been called
        plain.export(
            os.path.join(os.environ["KFSTACK_MODEL_DIR"], "model.onnx"), format="onnx", verbose=False
        )
