"""Scores a labelled dataset through the model server that will serve the model.

A standard format is scored by its stand-in (:mod:`kfstack.serving.standard_formats`), a custom
model by the team's own ``kserve.Model`` (:mod:`kfstack.serving.served_models`), each loaded and
called with the requests a client would send. Evaluation therefore goes through the code that
serves: the team's predictor's parity with its training is what the metrics measure.

Requests (:data:`REQUEST_FORMATS`):

- ``tensor``: each row the feature columns' values in order, a numeric matrix -- V1
  ``{"instances": [[...], ...]}`` for sklearn, xgboost and a custom model, one V2 input tensor
  (FP32, ``[n, width]``) for onnx as Triton takes it;
- ``records``: each row an object of its feature columns (``{"instances": [{...}, ...]}``),
  what a predictor of raw records takes.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from kfstack import contracts
from kfstack.errors import InvalidParameterError
from kfstack.evaluation.task_metrics import TaskEvaluation, check_task, evaluate
from kfstack.serving.model_server import call_predict
from kfstack.serving.served_models import MODEL_NAME, check_model, load_model

TENSOR, RECORDS = "tensor", "records"
# Where the training step records a model's format (the model artifact's metadata).
FORMAT_METADATA = "model_format"
REQUEST_FORMATS = (TENSOR, RECORDS)
DEFAULT_BATCH = 512


@dataclasses.dataclass
class LabelledRows:
    """A labelled dataset as requests will carry it."""

    features: Any  # a float matrix (tensor) or a list of dicts (records)
    labels: np.ndarray
    columns: list[str]

    def __len__(self) -> int:
        return len(self.labels)

    def batches(self, size: int) -> Any:
        for start in range(0, len(self), size):
            yield self.features[start : start + size]


def model_format_of(model_format: str, metadata: Mapping[str, Any]) -> str:
    """The format to score with: the parameter, else what the training step recorded on the
    model artifact.

    Raises:
        InvalidParameterError: Neither names one.
    """
    chosen = model_format or str(metadata.get(FORMAT_METADATA, ""))
    if not chosen:
        raise InvalidParameterError(
            "model_format: the model artifact records none (it was not trained by distributed_training); "
            "name the format"
        )
    return contracts.check_model_format(chosen)


def read_labelled(
    uri: str, label_column: str, feature_columns: Sequence[str], request_format: str
) -> LabelledRows:
    """The rows of the Parquet dataset at ``uri`` (a file or a folder of them).

    Raises:
        InvalidParameterError: No such column, no rows, or a tensor column that is not numeric.
    """
    import pyarrow.dataset as ds

    if request_format not in REQUEST_FORMATS:
        raise InvalidParameterError(
            f"request_format={request_format!r} is not one of {', '.join(REQUEST_FORMATS)}"
        )
    table = ds.dataset(uri, format="parquet").to_table()
    names = list(table.column_names)
    if label_column not in names:
        raise InvalidParameterError(
            f"label_column={label_column!r} is not a column of the dataset ({', '.join(names)})"
        )
    columns = list(feature_columns) or [name for name in names if name != label_column]
    missing = [name for name in columns if name not in names]
    if missing:
        raise InvalidParameterError(f"feature_columns: no column {', '.join(missing)} in the dataset")
    if table.num_rows == 0:
        raise InvalidParameterError(f"the dataset at {uri} has no rows")
    labels = table.column(label_column).to_numpy(zero_copy_only=False)
    if request_format == RECORDS:
        return LabelledRows(table.select(columns).to_pylist(), labels, columns)
    try:
        matrix = np.column_stack(
            [table.column(name).to_numpy(zero_copy_only=False).astype(np.float64) for name in columns]
        )
    except (TypeError, ValueError) as err:
        raise InvalidParameterError(f"request_format=tensor needs numeric feature columns: {err}") from None
    return LabelledRows(matrix, labels, columns)


def _onnx_request(model: Any, batch: np.ndarray) -> Any:
    from kserve import InferInput, InferRequest

    inputs = model.get_input_types()
    if len(inputs) != 1:
        names = ", ".join(spec["name"] for spec in inputs)
        raise InvalidParameterError(
            f"the onnx model takes {len(inputs)} inputs ({names}); evaluating a labelled table needs a "
            "model with one input tensor of the feature columns (a layer's statistics exported as "
            "inputs, e.g. Keras' Normalization through tf2onnx, is a common cause)"
        )
    [spec] = inputs
    tensor = InferInput(spec["name"], list(batch.shape), spec["datatype"])
    dtype = np.float64 if spec["datatype"] == "FP64" else np.float32
    tensor.set_data_from_numpy(batch.astype(dtype), binary_data=False)
    return InferRequest(model_name=MODEL_NAME, infer_inputs=[tensor])


def predict(
    model: Any, model_format: str, rows: LabelledRows, batch_size: int = DEFAULT_BATCH, output: int = 0
) -> np.ndarray:
    """Every row's prediction, batch by batch, through ``model.predict`` as a request.

    Args:
        output: onnx: which of the graph's outputs is the prediction (0: the first).
    """
    parts = []
    for batch in rows.batches(batch_size):
        if model_format == contracts.ONNX:
            response = call_predict(model, _onnx_request(model, batch))
            parts.append(response.outputs[output].as_numpy())
        else:
            instances = batch.tolist() if isinstance(batch, np.ndarray) else batch
            parts.append(np.asarray(call_predict(model, {"instances": instances})["predictions"]))
    return np.concatenate(parts)


def score_dataset(
    *,
    model_dir: str,
    model_format: str,
    dataset_uri: str,
    label_column: str,
    feature_columns: Sequence[str] = (),
    request_format: str = TENSOR,
    custom_predictor: str = "",
    batch_size: int = DEFAULT_BATCH,
) -> tuple[np.ndarray, np.ndarray]:
    """(labels, predictions) of the dataset, scored through the model's server."""
    check_model(model_format, custom_predictor)
    rows = read_labelled(dataset_uri, label_column, feature_columns, request_format)
    with tempfile.TemporaryDirectory(prefix="kfstack-eval-") as scratch:
        model = load_model(model_format, model_dir, custom_predictor, os.path.join(scratch, "repository"))
        return rows.labels, predict(model, model_format, rows, batch_size)


def evaluate_dataset(
    *,
    model_dir: str,
    model_format: str,
    dataset_uri: str,
    task: str,
    label_column: str,
    feature_columns: Sequence[str] = (),
    request_format: str = TENSOR,
    custom_predictor: str = "",
    threshold: float = 0.5,
    class_names: Sequence[str] = (),
    batch_size: int = DEFAULT_BATCH,
) -> TaskEvaluation:
    """Scores ``dataset_uri`` through the model's server (:func:`score_dataset`) and computes the
    task's metrics, its classes named by ``class_names`` (:meth:`TaskEvaluation.named`).

    Raises:
        InvalidParameterError: A bad parameter or dataset, before the model is loaded where it
            can be told.
    """
    check_task(task)
    if batch_size < 1:
        raise InvalidParameterError(f"batch_size={batch_size} must be >= 1")
    labels, predictions = score_dataset(
        model_dir=model_dir,
        model_format=model_format,
        dataset_uri=dataset_uri,
        label_column=label_column,
        feature_columns=feature_columns,
        request_format=request_format,
        custom_predictor=custom_predictor,
        batch_size=batch_size,
    )
    return evaluate(task, labels, predictions, threshold).named(class_names)
