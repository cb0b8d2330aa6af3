"""The model server: a ``kserve.Model`` serving the trainer's ``model.onnx``.

Constructed as KServe's runtimes construct a model, with its name and the model directory; any
server that runs a ``kserve.Model`` runs it (kfstack's format server with ``--model_format=custom
--custom_predictor=diabetes.predictor:DiabetesRegressor``, on this machine or in a
ServingRuntime's container). It never imports kfstack.

``POST /v1/models/<name>:predict`` takes ``{"instances": [...]}``, each instance either the ten
measurements in :data:`FEATURES` order (``[59, 2, 32.1, ...]``) or a record of them by name
(``{"age": 59, "sex": 2, ...}``; other fields are ignored), and answers ``{"predictions": [...]}``,
the predicted progression of each. A request it cannot read gets a 400 naming what is wrong.
"""

from __future__ import annotations

import math
import os
from typing import Any

import kserve
from kserve.errors import InvalidInput

from diabetes import FEATURES
from diabetes.train import MODEL_FILE

# The most instances one request may carry: a bound on the memory one request can take.
MAX_INSTANCES = 10_000


class DiabetesRegressor(kserve.Model):
    """The ONNX regressor behind KServe's V1 predict."""

    def __init__(self, name: str, model_dir: str) -> None:
        super().__init__(name)
        self.model_dir = model_dir
        self.session: Any = None

    def load(self) -> bool:
        import onnxruntime

        path = os.path.join(self.model_dir, MODEL_FILE)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"no {MODEL_FILE} in the model directory {self.model_dir}")
        self.session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
        self.ready = True
        return True

    def predict(self, payload: Any, headers: dict[str, str] | None = None) -> dict:
        import numpy as np

        rows = [self._row(i, instance) for i, instance in enumerate(_instances(payload))]
        features = np.asarray(rows, dtype="float32")
        (outputs,) = self.session.run(None, {self.session.get_inputs()[0].name: features})
        return {"predictions": [float(value) for value in outputs]}

    @staticmethod
    def _row(index: int, instance: Any) -> list[float]:
        """One instance as the ten measurements in order.

        Raises:
            InvalidInput: It is neither ten numbers nor a record of them (a 400).
        """
        if isinstance(instance, dict):
            missing = [name for name in FEATURES if name not in instance]
            if missing:
                raise InvalidInput(f"instances[{index}]: the record lacks {', '.join(missing)}")
            values = [instance[name] for name in FEATURES]
        elif isinstance(instance, list):
            if len(instance) != len(FEATURES):
                raise InvalidInput(
                    f"instances[{index}]: {len(instance)} values; expected {len(FEATURES)} "
                    f"({', '.join(FEATURES)})"
                )
            values = instance
        else:
            raise InvalidInput(f"instances[{index}]: expected a list of {len(FEATURES)} numbers or a record")
        for name, value in zip(FEATURES, values, strict=True):  # the length is checked above
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise InvalidInput(f"instances[{index}].{name}={value!r}: expected a finite number")
        return [float(value) for value in values]


def _instances(payload: Any) -> list[Any]:
    """The request's instances.

    Raises:
        InvalidInput: The body is not ``{"instances": [...]}`` with 1 to :data:`MAX_INSTANCES`.
    """
    if not isinstance(payload, dict) or not isinstance(payload.get("instances"), list):
        raise InvalidInput('expected a V1 body: {"instances": [[age, sex, bmi, bp, s1, ..., s6], ...]}')
    instances = payload["instances"]
    if not 1 <= len(instances) <= MAX_INSTANCES:
        raise InvalidInput(f"instances: {len(instances)} given; send 1 to {MAX_INSTANCES}")
    return instances
