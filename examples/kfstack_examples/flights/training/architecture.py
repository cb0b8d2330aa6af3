"""The delay classifier's architecture, shared by the PyTorch and TensorFlow trainers.

One embedding per categorical feature (vocabulary index, OOV included in the cardinality),
concatenated with the numeric features (imputed and scaled), through an MLP to one logit. Both
frameworks build exactly this network, export it to ONNX with the same interface -- inputs
``categorical`` int64 ``[batch, n_categorical]`` and ``numeric`` float32 ``[batch, n_numeric]``,
output ``probability`` ``[batch]`` -- so evaluation and serving do not care which trained it.
"""

from __future__ import annotations

import dataclasses

ONNX_INPUTS = ("categorical", "numeric")
ONNX_OUTPUT = "probability"


def embedding_dim(cardinality: int) -> int:
    """Half the categories, capped at 16: 4 rows (3 origins + OOV) -> 2, 101 dests -> 16."""
    return max(1, min(16, (cardinality + 1) // 2))


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """Everything needed to rebuild the network (stored in checkpoints)."""

    cardinalities: tuple[int, ...]
    num_numeric: int
    hidden: tuple[int, ...] = (64, 32)
