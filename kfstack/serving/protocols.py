"""How a canary analysis (and a deployment's smoke test) talks to a model server: the request path,
the body of a batch, and the predictions read back -- for every kind of server kfstack deploys.

- :class:`V1Predict`: ``POST /v1/models/<m>:predict`` with ``{"instances": [...]}`` (records or
  rows of numbers), predictions read from ``{"predictions": [...]}``: what a custom predictor,
  a team's ``kserve.Model`` and KServe's sklearn and xgboost runtimes answer. ``probabilities``
  holds a binary model to one probability per row.
- :class:`V2Tensor`: ``POST /v2/models/<m>/infer`` with one tensor of the rows (the Open
  Inference Protocol, as Triton takes an ONNX model's input), predictions read from one of the
  response's outputs, shaped as it says.

A parse that finds anything but one finite prediction (a number, or a vector of them) per row
raises :class:`ValueError` naming what was wrong: the analysis counts that request as an error.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np


class ServingProtocol(Protocol):
    """One way of asking a model server for predictions."""

    def path(self, model: str) -> str:
        """The request path for model ``model``."""
        ...

    def body(self, batch: Sequence[Any]) -> bytes:
        """The JSON body of one batch of rows."""
        ...

    def parse(self, payload: bytes, rows: int) -> np.ndarray:
        """``rows`` predictions, shape ``(rows,)`` or ``(rows, k)``.

        Raises:
            ValueError: The answer is not that.
        """
        ...


def _finite(values: np.ndarray, rows: int) -> np.ndarray:
    if values.ndim == 0 or values.shape[0] != rows:
        raise ValueError(f"{values.shape[0] if values.ndim else 1} answers for {rows} records")
    if values.ndim > 2 or not np.isfinite(values).all():
        raise ValueError("predictions that are not one finite number (or vector) per record")
    return values


@dataclasses.dataclass(frozen=True)
class V1Predict:
    """KServe's V1 protocol. ``probabilities``: each prediction must be one number in [0, 1]."""

    probabilities: bool = False

    def path(self, model: str) -> str:
        return f"/v1/models/{model}:predict"

    def body(self, batch: Sequence[Any]) -> bytes:
        return json.dumps({"instances": list(batch)}).encode()

    def parse(self, payload: bytes, rows: int) -> np.ndarray:
        try:
            predictions = json.loads(payload)["predictions"]
            values = np.asarray(predictions, dtype=np.float64)
        except (ValueError, KeyError, TypeError) as err:
            raise ValueError(f"not a V1 prediction response ({err})") from None
        values = _finite(values, rows)
        if self.probabilities and (values.ndim != 1 or not ((values >= 0) & (values <= 1)).all()):
            raise ValueError(f"{len(values)} answers for {rows} records, or not probabilities")
        return values


@dataclasses.dataclass(frozen=True)
class V2Tensor:
    """The Open Inference Protocol with the rows as one input tensor.

    Attributes:
        input_name: The model's input (an ONNX graph's input name).
        datatype: Its datatype (``FP32`` for most ONNX models).
        output: Which output of the response holds the predictions (0: the first).
    """

    input_name: str
    datatype: str = "FP32"
    output: int = 0

    def path(self, model: str) -> str:
        return f"/v2/models/{model}/infer"

    def body(self, batch: Sequence[Any]) -> bytes:
        rows = np.asarray(batch, dtype=np.float64)
        tensor = {
            "name": self.input_name,
            "shape": list(rows.shape),
            "datatype": self.datatype,
            "data": rows.reshape(-1).tolist(),
        }
        return json.dumps({"inputs": [tensor]}).encode()

    def parse(self, payload: bytes, rows: int) -> np.ndarray:
        try:
            output = json.loads(payload)["outputs"][self.output]
            shape = [int(d) for d in output["shape"]]
            values = np.asarray(output["data"], dtype=np.float64).reshape(shape)
        except (ValueError, KeyError, TypeError, IndexError) as err:
            raise ValueError(f"not a V2 inference response with output {self.output} ({err})") from None
        if values.ndim == 2 and values.shape[1] == 1:
            values = values[:, 0]
        return _finite(values, rows)


# A binary model's predictions through V1: one probability per row.
V1_PROBABILITIES = V1Predict(probabilities=True)
