"""``kfstack serve``: serves a trained model directory as its KServe runtime would (V1/V2 HTTP,
``/metrics``), with kfstack's format server (:mod:`kfstack.serving.format_server`).

It is also the public command a team's ServingRuntime runs on a cluster (``kfstack serve
--model /mnt/models --format custom --predictor package.module:Class --name {{.Name}} --port 8080
--address 0.0.0.0``): the flags KServe appends from the InferenceService (kfstack's server
flags, such as ``--live_drift_ignore_features=...``) are handed to the server, which checks them.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

from kfstack import contracts
from kfstack.app.cli.exit_codes import EXIT_FAILED
from kfstack.app.cli.options import PASSED_ON, Subparsers
from kfstack.errors import UsageError


def add_parser(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="serve a trained model directory as its KServe runtime would (V1/V2 HTTP, /metrics)",
        epilog="It listens on 127.0.0.1 (this machine alone) unless --address says otherwise. Any "
        "other --flag=VALUE is handed to the model server (kfstack's server flags, such as "
        "--live_drift_ignore_features, which a deployment appends on a cluster).",
    )
    parser.add_argument("--model", required=True, metavar="DIR", help="a trained model directory")
    parser.add_argument(
        "--format",
        required=True,
        choices=contracts.MODEL_FORMATS,
        help="its format (custom: a team's kserve.Model)",
    )
    parser.add_argument(
        "--predictor", default="", metavar="MODULE:CLASS", help="custom: the kserve.Model class"
    )
    parser.add_argument("--port", type=int, default=8080, help="HTTP port (default 8080)")
    parser.add_argument(
        "--address",
        default="127.0.0.1",
        help="the address to listen on (default 127.0.0.1; 0.0.0.0: every interface, as in a pod)",
    )
    parser.add_argument("--name", default="model", help="the model's name in the URLs (default model)")
    parser.set_defaults(func=handle, **{PASSED_ON: []})


def handle(args: argparse.Namespace) -> int:
    """Replaces this process with kfstack's format server (the embedded platform's model
    server), so that Ctrl-C and SIGTERM reach KServe's server."""
    from kfstack.serving import format_server

    model_dir = os.path.abspath(args.model)
    if args.format == contracts.CUSTOM:
        # Found, not imported: a kserve.Model module imports kserve, which parses this process's
        # argv as its own flags. The server imports it (and says so when it cannot).
        module, _, name = args.predictor.partition(":")
        if not (module and name.isidentifier()):
            raise UsageError(
                "--format custom: name the team's kserve.Model as --predictor package.module:Class"
            )
        problem = contracts.module_problem(module, required=True)
        if problem:
            raise UsageError(f"--predictor {args.predictor}: {problem}")
    problem = (
        contracts.model_dir_problem(model_dir, args.format) if os.path.isdir(model_dir) else "no such folder"
    )
    if problem:
        raise UsageError(f"--model {args.model}: not a {args.format} model directory: {problem}")
    server_flags = list(getattr(args, PASSED_ON, []))
    strays = [flag for flag in server_flags if not flag.startswith("--")]
    if strays:
        raise UsageError(f"serve: unexpected {' '.join(strays)}: the server takes --flag=VALUE only")
    served = model_dir
    if args.format == contracts.ONNX:  # served as Triton serves it: from a model repository
        # kserve, which the layout's module imports, parses sys.argv as its own flags at import.
        argv, sys.argv = sys.argv, sys.argv[:1]
        try:
            from kfstack.serving.standard_formats import triton_layout
        finally:
            sys.argv = argv
        served = tempfile.mkdtemp(prefix="kfstack-serve-")
        triton_layout(model_dir, args.name, served)
    print(
        f"kfstack serve: {model_dir} ({args.format}) as '{args.name}' on port {args.port} -- "
        f"http://{args.address}:{args.port}/v2/models/{args.name} (and V1 .../v1/models/{args.name}:predict "
        f"but for onnx), /metrics; Ctrl-C stops it",
        file=sys.stderr,
        flush=True,
    )
    argv = format_server.command(
        served, args.name, args.port, args.format, args.predictor, *server_flags, bind_address=args.address
    )
    os.execv(sys.executable, argv)
    return EXIT_FAILED  # not reached: execv replaced this process
