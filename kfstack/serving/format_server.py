"""Serves a model directory on KServe's ``ModelServer``, as a cluster's runtime for it would.

``python -m kfstack.serving.format_server --model_format=sklearn --model_name=m --model_dir=DIR
--http_port=8080`` serves a standard format through its stand-in
(:mod:`kfstack.serving.standard_formats`; for ``onnx`` ``--model_dir`` is Triton's model
repository, ``<dir>/<name>/1/model.onnx``). ``--model_format=custom
--custom_predictor=package.module:Class`` serves a team's own ``kserve.Model``, built as
``Class(name, model_dir)``: on the embedded platform, and as the container command of the
team's own ServingRuntime on a cluster (``--model_name={{.Name}} --model_dir=/mnt/models
--http_port=8080``), so the team writes a model class and no server. Either way kfstack's request
hooks are on (:mod:`kfstack.serving.model_server`). The flags are KServe's runtimes' own, plus
``--live_drift*`` (:func:`kfstack.serving.model_server.add_live_drift_arguments`): a model
directory with a ``profile.json`` is watched for live drift, the sklearn and xgboost stand-ins'
rows by position and a team's model's by name, fed by its own ``self.drift.observe(...)``.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys

from kfstack import contracts
from kfstack.errors import InvalidParameterError

logger = logging.getLogger("kfstack.format_server")
MODULE = "kfstack.serving.format_server"


def command(
    model_dir: str,
    name: str,
    port: int,
    model_format: str,
    custom_predictor: str = "",
    *extra: str,
    bind_address: str = "127.0.0.1",
) -> list[str]:
    """The server's command line on this machine (the embedded platform's servers, ``kfstack
    serve``): gRPC off, every client here speaks HTTP; listening on ``bind_address`` (this
    machine's clients only, unless ``kfstack serve --address`` widens it); ``extra``: more of
    KServe's flags."""
    return [
        sys.executable,
        "-m",
        MODULE,
        f"--model_name={name}",
        f"--model_dir={model_dir}",
        f"--http_port={port}",
        f"--bind_address={bind_address}",
        "--enable_grpc=false",
        f"--model_format={model_format}",
        *([f"--custom_predictor={custom_predictor}"] if custom_predictor else []),
        *extra,
    ]


def parser() -> argparse.ArgumentParser:
    import kserve

    from kfstack.serving.model_server import add_live_drift_arguments, add_server_arguments

    p = argparse.ArgumentParser(
        prog="python -m kfstack.serving.format_server",
        description="Serve a model directory as KServe's runtime for its format (or the team's own) does.",
        parents=[kserve.model_server.parser],
    )
    p.add_argument("--model_format", required=True, choices=contracts.MODEL_FORMATS)
    p.add_argument("--model_dir", required=True, help="the model directory (onnx: Triton's model repository)")
    p.add_argument(
        "--custom_predictor", default="", help="custom: the team's kserve.Model, package.module:Class"
    )
    add_live_drift_arguments(p)
    add_server_arguments(p)
    return p


def main(argv: list[str] | None = None) -> int:
    """Loads the model and serves it until SIGTERM/SIGINT; 2 when the directory holds no model
    of the format."""
    from kfstack.monitoring.live_drift import OFF, ON
    from kfstack.serving.model_server import (
        attach_live_drift,
        check_one_worker,
        live_drift_settings,
        serve,
        server_options,
    )
    from kfstack.serving.served_models import build_model

    args = parser().parse_args(argv)
    try:
        check_one_worker(args.workers)
        model = build_model(args.model_format, args.model_name, args.model_dir, args.custom_predictor)
        drift = live_drift_settings(args, model)
        if args.model_format == contracts.ONNX and drift.mode != OFF:
            # Triton, which the onnx stand-in stands in for, exports no kfstack metrics.
            reason = "the onnx format is served as Triton serves it, without kfstack's metrics"
            if drift.mode == ON:
                raise InvalidParameterError(f"--live_drift=on: {reason}")
            logger.info("live drift off: %s", reason)
            drift = dataclasses.replace(drift, mode=OFF)
        model.load()
        # The sklearn and xgboost stand-ins take a matrix (rows by position); a team's model is
        # fed by name.
        matrix = args.model_format in (contracts.SKLEARN, contracts.XGBOOST)
        attach_live_drift(
            model,
            args.model_dir,
            drift,
            columns=model.feature_columns() if matrix else None,
            by_position=matrix,
        )
    except (FileNotFoundError, ValueError) as err:
        logger.error("cannot serve %s: %s", args.model_dir, err)
        return 2
    serve(model, args.http_port, args.grpc_port, **server_options(args), enable_grpc=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
