"""Stand-ins for KServe's model-format runtimes, so the embedded platform serves what a cluster would.

On a cluster a model of a standard format runs on KServe's own runtime for it
(docs/architecture.md#kserve); those servers ship as images only, not on PyPI. Here each format gets
a ``kserve.Model`` that loads the same files and answers the same request and response shapes, on
KServe's own ``ModelServer`` (with kfstack's hooks, :mod:`kfstack.serving.model_server`):

- ``sklearn`` mirrors ``kserve-sklearnserver`` 0.20 (scikit-learn ~=1.5.1; the ``sklearn``
  extra pins that line): exactly one ``.joblib``, ``.pkl`` or ``.pickle`` file at the top of the
  model directory, loaded with joblib; ``predict``, or ``predict_proba`` when the env
  ``PREDICT_PROBA=true``; V1 and V2 through KServe's own ``get_predict_input`` and
  ``get_predict_response`` (V2 output ``output-0``).
- ``xgboost`` mirrors ``kserve-xgbserver`` 0.20 (xgboost ~=2.1.1; the ``xgboost-cpu`` wheel,
  which carries no NCCL): exactly one ``.bst``, ``.json`` or ``.ubj`` booster at the top.
- ``onnx`` mirrors Triton as ``kserve-tritonserver`` runs it: V2 only, a model repository laid
  out as ``<repository>/<name>/1/model.onnx`` (:func:`triton_layout` lays a trained model out
  so), inputs and outputs by the graph's names and Triton's datatypes, ``GET /v2/models/<name>``
  with them. onnxruntime stands in for Triton's ONNX Runtime backend.

The sklearn and xgboost stand-ins feed live drift (:func:`kfstack.serving.model_server.
attach_live_drift`) the rows they answered: a matrix's columns by position, named by the
model's own feature names (scikit-learn's ``feature_names_in_`` of a model fitted on a
DataFrame, the booster's ``feature_names``) or else the profile's ``feature_order``; a V2
``content_type: pd`` request's columns by name. The onnx stand-in does not (Triton, which it
stands in for, exports no kfstack metrics).

Parity with the real runtimes is claimed only as far as the pinned libraries and KServe's own
request helpers go: these are not KServe's or Triton's servers. Where kfstack goes beyond them,
on purpose: a malformed request (not a numeric matrix of the model's width, an unknown input)
gets a 400 naming the problem where KServe's sklearn and xgboost servers wrap every error as a
500; the sklearn and xgboost stand-ins answer ``GET /v2/models/<name>`` with the input width the
model records (KServe's own answer empty lists).
"""

from __future__ import annotations

import os
import posixpath
import shutil
from typing import Any

import fsspec
import kserve
import numpy as np
from kserve import InferOutput, InferRequest, InferResponse
from kserve.errors import InvalidInput
from kserve.utils.utils import get_predict_input, get_predict_response

from kfstack import contracts, distributions
from kfstack.errors import InvalidParameterError
from kfstack.monitoring.live_drift import NO_LIVE_DRIFT

TRITON_VERSION = "1"
TRITON_MODEL_FILE = "model.onnx"
PREDICT_PROBA_ENV = "PREDICT_PROBA"
_ONNX_TO_TRITON = {
    "tensor(float)": "FP32",
    "tensor(double)": "FP64",
    "tensor(float16)": "FP16",
    "tensor(int64)": "INT64",
    "tensor(int32)": "INT32",
    "tensor(int16)": "INT16",
    "tensor(int8)": "INT8",
    "tensor(uint8)": "UINT8",
    "tensor(bool)": "BOOL",
    "tensor(string)": "BYTES",
}


def single_model_file(model_dir: str, model_format: str) -> str:
    """The one model file of ``model_format`` at the top of ``model_dir`` (a path or any fsspec
    URI), as KServe's sklearn and xgboost servers find it; a path for a local directory, else a
    URI.

    Raises:
        FileNotFoundError: There is none.
        ValueError: There is more than one.
    """
    fs, root = fsspec.core.url_to_fs(model_dir)
    names = [
        posixpath.basename(entry["name"]) for entry in fs.ls(root, detail=True) if entry["type"] == "file"
    ]
    files = contracts.model_files(names, model_format)
    if not files:
        suffixes = "/".join(contracts.MODEL_FILE_SUFFIXES[model_format])
        raise FileNotFoundError(f"no {suffixes} file in {model_dir} for format {model_format!r}")
    if len(files) > 1:
        raise ValueError(f"more than one {model_format} model file in {model_dir}: {files}; one is allowed")
    path = posixpath.join(root, files[0])
    return path if "file" in fs.protocol else fs.unstrip_protocol(path)


def triton_layout(model_dir: str, name: str, repository: str) -> str:
    """Lays ``model_dir``'s ``.onnx`` file out as Triton's model repository under ``repository``
    (``<repository>/<name>/1/model.onnx``; either a path or any fsspec URI); returns the file
    laid out.

    Raises:
        FileNotFoundError / ValueError: Not exactly one ``.onnx`` file at the top of ``model_dir``.
    """
    source = single_model_file(model_dir, contracts.ONNX)
    target = posixpath.join(repository.rstrip("/"), name, TRITON_VERSION, TRITON_MODEL_FILE)
    fs, path = fsspec.core.url_to_fs(target)
    fs.makedirs(posixpath.dirname(path), exist_ok=True)
    with fsspec.open(source, "rb") as source_file, fs.open(path, "wb") as target_file:
        shutil.copyfileobj(source_file, target_file)
    return target


def _check_shapes(payload: Any) -> None:
    """A V2 request's tensors: each shape a list of sizes (whole numbers, none negative) whose
    product is the number of values its data holds, as the Open Inference Protocol has it
    (numpy would read a negative size as "whatever fits").

    Raises:
        InvalidInput: The first tensor that is not so.
    """
    if not isinstance(payload, InferRequest):
        return
    for tensor in payload.inputs:
        shape = tensor.shape
        if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
            raise InvalidInput(f"inputs[{tensor.name}]: shape {shape}: expected sizes, whole numbers >= 0")
        data = tensor.data
        if isinstance(data, list):
            count = int(np.asarray(data, dtype=object).size) if data else 0
            if count != int(np.prod(shape, dtype=np.float64)):
                raise InvalidInput(f"inputs[{tensor.name}]: shape {shape} but {count} values in data")


def _matrix(payload: Any, width: int | None) -> Any:
    """The request's rows as KServe's helper reads them, checked to be a numeric matrix of the
    model's width; a DataFrame (V2 ``content_type: pd``) is checked the same way and kept, so
    that a model fitted on named columns gets them by name.

    Raises:
        InvalidInput: Whatever is wrong, named (KServe's helper's own errors on a malformed body
            included: it raises KeyError, ValueError, TypeError... that its server answers 500).
    """
    _check_shapes(payload)
    try:
        instances = get_predict_input(payload)
    except InvalidInput:
        raise
    except Exception as err:  # a malformed body, whatever the helper raised
        raise InvalidInput(
            f"the request is not V1 instances or V2 inputs of a matrix ({type(err).__name__}: {err})"
        ) from None
    try:
        array = np.asarray(
            instances.to_numpy(dtype=np.float64) if hasattr(instances, "columns") else instances,
            dtype=np.float64,
        )
    except (TypeError, ValueError) as err:
        raise InvalidInput(f"instances: not a matrix of numbers ({err})") from None
    if array.ndim != 2 or array.shape[0] == 0:
        raise InvalidInput(
            f"instances: expected a non-empty list of rows of numbers, got shape {list(array.shape)}"
        )
    if width is not None and array.shape[1] != width:
        raise InvalidInput(f"instances: rows of {array.shape[1]} values; the model takes {width}")
    if not np.isfinite(array).all():
        raise InvalidInput("instances: every value must be a finite number")
    return instances if hasattr(instances, "columns") else array


def _refused_by_model(err: Exception) -> InvalidInput:
    """A numeric matrix of the right width that the model itself refuses (a DataFrame whose
    column names are not the ones it was fitted on): the request's fault, said as such."""
    return InvalidInput(f"instances: the model refuses them: {err}")


class _MatrixModel(kserve.Model):
    """A stand-in whose model takes rows of ``width`` numbers and answers a value per row, as
    KServe's sklearn and xgboost servers name them in V2 (``input-0``, ``output-0``); its
    ``GET /v2/models/<name>`` tells the width the model records (see the module docstring)."""

    # The V2 datatype of the tensors, as the runtime it stands in for declares them.
    datatype: str
    # The live-drift window the answered rows go to (kfstack.serving.model_server.attach_live_drift).
    drift: Any = NO_LIVE_DRIFT

    @property
    def width(self) -> int | None:
        raise NotImplementedError

    def feature_columns(self) -> tuple[str, ...] | None:
        """The names of the matrix's columns in order, where the model records them."""
        raise NotImplementedError

    def get_input_types(self) -> list[dict]:
        return [{"name": "input-0", "datatype": self.datatype, "shape": [-1, self.width or -1]}]

    def get_output_types(self) -> list[dict]:
        return [{"name": "output-0", "datatype": self.datatype, "shape": [-1]}]


class SklearnModel(_MatrixModel):
    """The ``sklearn`` format as ``kserve-sklearnserver`` 0.20 serves it."""

    datatype = "FP64"

    def __init__(self, name: str, model_dir: str) -> None:
        super().__init__(name)
        self.model_dir = model_dir
        self.model: Any = None

    def load(self) -> bool:
        import joblib

        self.model = joblib.load(single_model_file(self.model_dir, contracts.SKLEARN))
        self.ready = True
        return self.ready

    @property
    def width(self) -> int | None:
        return getattr(self.model, "n_features_in_", None)

    def feature_columns(self) -> tuple[str, ...] | None:
        names = getattr(self.model, "feature_names_in_", None)
        return None if names is None else tuple(str(name) for name in names)

    def predict(self, payload: Any, headers: dict[str, str] | None = None) -> Any:
        instances = _matrix(payload, self.width)
        proba = os.environ.get(PREDICT_PROBA_ENV, "false").lower() == "true"
        try:
            if proba and hasattr(self.model, "predict_proba"):
                result = self.model.predict_proba(instances)
            else:
                result = self.model.predict(instances)
        except ValueError as err:
            raise _refused_by_model(err) from None
        self.drift.observe(instances)
        return get_predict_response(payload, result, self.name)


class XGBoostModel(_MatrixModel):
    """The ``xgboost`` format as ``kserve-xgbserver`` 0.20 serves it."""

    datatype = "FP32"

    def __init__(self, name: str, model_dir: str, nthread: int = 1) -> None:
        super().__init__(name)
        self.model_dir = model_dir
        self.nthread = nthread
        self.booster: Any = None

    def load(self) -> bool:
        xgboost = distributions.require("xgboost", "the xgboost model server")

        with open(single_model_file(self.model_dir, contracts.XGBOOST), "rb") as f:
            self.booster = xgboost.Booster(params={"nthread": self.nthread}, model_file=bytearray(f.read()))
        self.ready = True
        return self.ready

    @property
    def width(self) -> int | None:
        width = self.booster.num_features() if self.booster is not None else 0
        return width or None

    def feature_columns(self) -> tuple[str, ...] | None:
        names = self.booster.feature_names if self.booster is not None else None
        return tuple(names) if names else None

    def predict(self, payload: Any, headers: dict[str, str] | None = None) -> Any:
        import xgboost

        instances = _matrix(payload, self.width)
        try:
            result = self.booster.predict(xgboost.DMatrix(instances, nthread=self.nthread))
        except (ValueError, xgboost.core.XGBoostError) as err:
            raise _refused_by_model(err) from None
        self.drift.observe(instances)
        return get_predict_response(payload, result, self.name)


class TritonOnnxModel(kserve.Model):
    """The ``onnx`` format as Triton serves it: V2 only, from a model repository."""

    def __init__(self, name: str, model_dir: str) -> None:
        super().__init__(name)
        self.repository = model_dir
        self.session: Any = None

    def load(self) -> bool:
        onnxruntime = distributions.require("onnxruntime", "the onnx model server")

        path = os.path.join(self.repository, self.name, TRITON_VERSION, TRITON_MODEL_FILE)
        if not os.path.isfile(path):
            raise FileNotFoundError(
                f"no {self.name}/{TRITON_VERSION}/{TRITON_MODEL_FILE} in the model repository "
                f"{self.repository} (Triton's layout; kfstack.serving.standard_formats.triton_layout)"
            )
        self.session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
        self.ready = True
        return self.ready

    @staticmethod
    def _types(args: list[Any]) -> list[dict]:
        return [
            {
                "name": arg.name,
                "datatype": _ONNX_TO_TRITON.get(arg.type, arg.type),
                "shape": [dim if isinstance(dim, int) else -1 for dim in arg.shape],
            }
            for arg in args
        ]

    def get_input_types(self) -> list[dict]:
        return self._types(self.session.get_inputs())

    def get_output_types(self) -> list[dict]:
        return self._types(self.session.get_outputs())

    def _feed(self, request: Any) -> dict[str, np.ndarray]:
        expected = {spec["name"]: spec for spec in self.get_input_types()}
        given = {tensor.name: tensor for tensor in request.inputs}
        if len(given) != len(request.inputs):
            raise InvalidInput("inputs: an input given more than once")
        unknown = sorted(set(given) - set(expected))
        missing = sorted(set(expected) - set(given))
        if unknown or missing:
            raise InvalidInput(
                f"inputs: the model takes {', '.join(expected)}"
                + (f"; unknown: {', '.join(unknown)}" if unknown else "")
                + (f"; missing: {', '.join(missing)}" if missing else "")
            )
        feed = {}
        for name, spec in expected.items():
            tensor = given[name]
            if tensor.datatype != spec["datatype"]:
                raise InvalidInput(
                    f"inputs[{name}]: datatype {tensor.datatype}; the model takes {spec['datatype']}"
                )
            try:
                array = tensor.as_numpy()
            except (TypeError, ValueError) as err:
                raise InvalidInput(f"inputs[{name}]: {err}") from None
            if array.dtype.kind == "f" and not np.isfinite(array).all():
                # JSON has no NaN: a null became one (Triton refuses a null as a number).
                raise InvalidInput(f"inputs[{name}]: every value must be a finite number")
            fixed = spec["shape"]
            if len(array.shape) != len(fixed) or any(
                d not in (-1, a) for d, a in zip(fixed, array.shape, strict=True)
            ):
                raise InvalidInput(
                    f"inputs[{name}]: shape {list(array.shape)}; the model takes {fixed} (-1: any)"
                )
            feed[name] = array
        return feed

    def predict(self, payload: Any, headers: dict[str, str] | None = None) -> Any:
        if not isinstance(payload, InferRequest):
            raise InvalidInput(
                "the onnx format is served as Triton serves it: Open Inference Protocol (V2) "
                "only, POST /v2/models/<name>/infer"
            )
        _check_shapes(payload)
        feed = self._feed(payload)
        names = [output.name for output in self.session.get_outputs()]
        results = self.session.run(names, feed)
        outputs = []
        for name, spec, value in zip(names, self.get_output_types(), results, strict=True):
            output = InferOutput(name=name, shape=list(value.shape), datatype=spec["datatype"])
            output.set_data_from_numpy(np.asarray(value), binary_data=payload.use_binary_outputs)
            outputs.append(output)
        return InferResponse(
            response_id=payload.id or "",
            model_name=self.name,
            infer_outputs=outputs,
            use_binary_outputs=payload.use_binary_outputs,
        )


def model_for(model_format: str, name: str, model_dir: str) -> Any:
    """The stand-in ``kserve.Model`` of a standard format (not yet loaded).

    Raises:
        InvalidParameterError: ``custom`` or an unknown format: a team's own predictor serves it.
    """
    builders: dict[str, type] = {
        contracts.SKLEARN: SklearnModel,
        contracts.XGBOOST: XGBoostModel,
        contracts.ONNX: TritonOnnxModel,
    }
    if model_format not in builders:
        raise InvalidParameterError(
            f"model_format={model_format!r}: the embedded platform stands in for "
            f"{', '.join(builders)}; a custom model is served by the team's own predictor"
        )
    return builders[model_format](name, model_dir)
