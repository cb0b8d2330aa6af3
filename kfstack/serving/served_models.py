"""The model a kfstack server serves, whatever its format: a standard format's stand-in
(:mod:`kfstack.serving.standard_formats`) or a team's own ``kserve.Model``, constructed as KServe's
runtimes construct a model -- with its name and directory, ``Class(name, model_dir)`` -- and
loaded. The format server (:mod:`kfstack.serving.format_server`) serves it; evaluation
(:mod:`kfstack.serving.scoring`) calls it in-process. Every model built here has a ``drift``
whose ``observe`` its predict may call (:mod:`kfstack.monitoring.live_drift`): a server gives it
a window, in-process it keeps nothing."""

from __future__ import annotations

import importlib
import tempfile
from typing import Any

from kfstack import contracts
from kfstack.errors import InvalidParameterError
from kfstack.monitoring.live_drift import NO_LIVE_DRIFT

MODEL_NAME = "model"


def predictor_class(custom_predictor: str) -> Any:
    """The team's ``kserve.Model`` subclass named ``package.module:Class``.

    Raises:
        InvalidParameterError: Malformed, not importable here, or not a class.
    """
    module, _, name = custom_predictor.partition(":")
    if not module or not name.isidentifier():
        raise InvalidParameterError(f"custom_predictor={custom_predictor!r}: expected package.module:Class")
    try:
        found = getattr(importlib.import_module(module), name, None)
    except ImportError as err:
        raise InvalidParameterError(f"custom_predictor={custom_predictor!r}: {err}") from err
    if not isinstance(found, type):
        raise InvalidParameterError(f"custom_predictor={custom_predictor!r}: no class {name!r} in {module}")
    return found


def check_model(model_format: str, custom_predictor: str = "") -> None:
    """What can be told of the model before any data is read or any file loaded.

    Raises:
        InvalidParameterError: An unknown format, a custom format without ``custom_predictor``,
            or one that cannot be imported here.
    """
    contracts.check_model_format(model_format)
    if model_format == contracts.CUSTOM:
        if not custom_predictor:
            raise InvalidParameterError(
                "model_format=custom: name the team's kserve.Model as custom_predictor"
            )
        predictor_class(custom_predictor)


def build_model(model_format: str, name: str, model_dir: str, custom_predictor: str = "") -> Any:
    """The model a server serves as ``name`` from ``model_dir`` (for ``onnx``: Triton's model
    repository), not loaded yet: a standard format's stand-in, or the team's class.

    Raises:
        InvalidParameterError: See :func:`check_model`.
    """
    check_model(model_format, custom_predictor)
    if model_format == contracts.CUSTOM:
        model = predictor_class(custom_predictor)(name, model_dir)
        # Its predict may feed ``self.drift`` (a server attaches a window; in-process, none).
        if not hasattr(model, "drift"):
            model.drift = NO_LIVE_DRIFT
        return model
    from kfstack.serving import standard_formats

    return standard_formats.model_for(model_format, name, model_dir)


def load_model(model_format: str, model_dir: str, custom_predictor: str = "", scratch: str = "") -> Any:
    """The loaded model for a trained model directory (an ``onnx`` one laid out as Triton's
    repository under ``scratch`` first).

    Raises:
        InvalidParameterError: See :func:`check_model`.
    """
    check_model(model_format, custom_predictor)
    if model_format == contracts.ONNX:
        from kfstack.serving import standard_formats

        repository = scratch or tempfile.mkdtemp(prefix="kfstack-triton-")
        standard_formats.triton_layout(model_dir, MODEL_NAME, repository)
        model_dir = repository
    model = build_model(model_format, MODEL_NAME, model_dir, custom_predictor)
    model.load()
    return model
