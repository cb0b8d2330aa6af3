"""The delay classifier in Keras: the network of :mod:`kfstack_examples.flights.training.architecture`."""

from __future__ import annotations

import keras
import numpy as np

from kfstack_examples.flights.training.architecture import ONNX_INPUTS, ModelConfig, embedding_dim


def build_classifier(config: ModelConfig, seed: int) -> keras.Model:
    """Inputs ``categorical`` (int64) and ``numeric`` (float32) -> logits ``[batch, 1]`` (float32).

    Under a ``mixed_bfloat16`` policy the layers compute in bf16; the last one is pinned to
    float32 so the loss sees full-precision logits.
    """
    categorical = keras.Input(shape=(len(config.cardinalities),), dtype="int64", name=ONNX_INPUTS[0])
    numeric = keras.Input(shape=(config.num_numeric,), dtype="float32", name=ONNX_INPUTS[1])
    initializer = keras.initializers.GlorotUniform
    embedded = [
        keras.layers.Flatten()(
            keras.layers.Embedding(
                cardinality,
                embedding_dim(cardinality),
                embeddings_initializer=keras.initializers.RandomNormal(seed=seed + i),
            )(categorical[:, i : i + 1])
        )
        for i, cardinality in enumerate(config.cardinalities)
    ]
    x = keras.layers.Concatenate()([*embedded, numeric])
    for j, width in enumerate(config.hidden):
        x = keras.layers.Dense(width, activation="relu", kernel_initializer=initializer(seed=seed + 100 + j))(
            x
        )
    logits = keras.layers.Dense(1, dtype="float32", kernel_initializer=initializer(seed=seed + 200))(x)
    return keras.Model([categorical, numeric], logits, name="delay_classifier")


def serving_model(classifier: keras.Model) -> keras.Model:
    """The exported graph: the same inputs -> ``probability`` ``[batch]`` in float32."""
    categorical, numeric = classifier.inputs
    logits = classifier([categorical, numeric])
    probability = keras.layers.Activation("sigmoid", dtype="float32")(logits)
    probability = keras.layers.Reshape((), name="probability")(probability)
    return keras.Model([categorical, numeric], probability, name="delay_probability")


def weights_state(model: keras.Model, optimizer: keras.optimizers.Optimizer) -> dict[str, np.ndarray]:
    """Model and optimizer variables as named arrays (the checkpoint payload)."""
    state = {f"model/{i}": np.asarray(v.numpy()) for i, v in enumerate(model.weights)}
    state.update({f"optimizer/{i}": np.asarray(v.numpy()) for i, v in enumerate(optimizer.variables)})
    return state


def restore_state(
    model: keras.Model, optimizer: keras.optimizers.Optimizer, state: dict[str, np.ndarray]
) -> None:
    """Assigns what :func:`weights_state` saved (the optimizer must be built first)."""
    for i, variable in enumerate(model.weights):
        variable.assign(state[f"model/{i}"])
    for i, variable in enumerate(optimizer.variables):
        variable.assign(state[f"optimizer/{i}"])
