"""Serves a model of a standard format on loopback, as KServe's runtime for it would on a cluster.

``python -m kfstack.serving.format_server --model_format=sklearn --model_name=m --model_dir=DIR
--http_port=8080`` loads the stand-in of :mod:`kfstack.serving.standard_formats` and serves it on
KServe's ``ModelServer`` with kfstack's request hooks (:mod:`kfstack.serving.model_server`). The
flags are KServe's runtimes' own (``--model_name``, ``--model_dir``, ``--http_port``), so the
embedded deployment starts it the way a ServingRuntime's container starts. For ``onnx``,
``--model_dir`` is Triton's model repository (``<dir>/<name>/1/model.onnx``).
"""

from __future__ import annotations

import argparse
import logging

from kfstack import contracts

logger = logging.getLogger("kfstack.format_server")


def parser() -> argparse.ArgumentParser:
    import kserve

    p = argparse.ArgumentParser(
        prog="python -m kfstack.serving.format_server",
        description="Serve a model directory of a standard format as KServe's runtime for it does.",
        parents=[kserve.model_server.parser],
    )
    p.add_argument(
        "--model_format", required=True, choices=[f for f in contracts.MODEL_FORMATS if f != "custom"]
    )
    p.add_argument("--model_dir", required=True, help="the model directory (onnx: Triton's model repository)")
    return p


def main(argv: list[str] | None = None) -> int:
    """Loads the model and serves it until SIGTERM/SIGINT; 2 when the directory holds no model
    of the format."""
    import kserve

    from kfstack.serving.local_services import exit_with_owner
    from kfstack.serving.model_server import install_request_hooks
    from kfstack.serving.standard_formats import model_for

    args = parser().parse_args(argv)
    model = model_for(args.model_format, args.model_name, args.model_dir)
    try:
        model.load()
    except (FileNotFoundError, ValueError) as err:
        logger.error("cannot serve %s: %s", args.model_dir, err)
        return 2
    install_request_hooks(kserve.model_server.app, model.name)
    exit_with_owner()  # started by an embedded run: stop when the run's owner is gone
    kserve.ModelServer(http_port=args.http_port, grpc_port=args.grpc_port, enable_grpc=False).start([model])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
