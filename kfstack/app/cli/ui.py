"""``kfstack ui``: the MLflow UI on the embedded runs' tracking store (:mod:`kfstack.tracking.store`),
on loopback until Ctrl-C."""

from __future__ import annotations

import argparse
import os

from kfstack.app.cli.exit_codes import EXIT_OK
from kfstack.app.cli.options import DEFAULT_PIPELINE_ROOT, Subparsers
from kfstack.errors import UsageError

DEFAULT_PORT = 5000


def add_parser(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "ui", help="open the MLflow UI on the embedded runs' tracking store (until Ctrl-C)"
    )
    parser.add_argument("--pipeline-root", default=DEFAULT_PIPELINE_ROOT, help="where the runs are")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="on 127.0.0.1 (0: a free one)")
    parser.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from kfstack.tracking.store import (
        SERVER_INSTALL_HINT,
        LocalServer,
        ServerNotReady,
        advertised,
        server_installed,
        store_dir,
    )

    if not server_installed():
        raise UsageError(f"kfstack ui needs the full MLflow (its server and UI): {SERVER_INSTALL_HINT}")
    if not os.path.isdir(store_dir(args.pipeline_root)):
        print(f"no run has been tracked under {args.pipeline_root} yet: the UI opens on an empty store")
    server = LocalServer(args.pipeline_root, port=args.port)
    with server.running():
        try:
            server.wait_ready()
        except ServerNotReady as err:
            raise UsageError(f"kfstack ui: {err} (is port {server.port} taken? --port)") from err
        print(
            f"MLflow UI on {server.uri} (the store under {store_dir(args.pipeline_root)}); runs under "
            f"{args.pipeline_root} track through it meanwhile; Ctrl-C stops it",
            flush=True,
        )
        assert server.process is not None
        with advertised(server):
            server.process.wait()
    return EXIT_OK
