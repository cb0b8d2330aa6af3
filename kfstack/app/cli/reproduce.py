"""``kfstack reproduce``: trains a model again from its lineage record on the embedded platform
and compares the two (:mod:`kfstack.app.reproduce`)."""

from __future__ import annotations

import argparse
import os
import sys

from kfstack.app.cli.exit_codes import EXIT_FAILED, EXIT_OK
from kfstack.app.cli.options import DEFAULT_PIPELINE_ROOT, Subparsers
from kfstack.lineage import DEFAULT_TOLERANCE


def add_parser(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "reproduce",
        help="train a model again from its lineage record on the embedded platform and compare",
        epilog="Refuses when the checked-out code is not the recorded pipeline version.",
    )
    parser.add_argument("model_dir", metavar="MODEL_DIR", help="a model directory with its lineage.json")
    parser.add_argument(
        "--pipeline", metavar="NAME", help="the pipeline that made it; optional when one is installed"
    )
    parser.add_argument(
        "--pipeline-root", default=DEFAULT_PIPELINE_ROOT, help="where the reproduction's run directory goes"
    )
    parser.add_argument(
        "--tolerance",
        type=float,
        default=DEFAULT_TOLERANCE,
        help=f"largest absolute difference of a metric that still matches (default {DEFAULT_TOLERANCE})",
    )
    parser.add_argument("--verbose", action="store_true", help="stream every task's output")
    parser.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from kfstack.app.reproduce import reproduce

    # reproduce refuses a missing record or other code before its run makes the pipeline root.
    result = reproduce(
        os.path.abspath(args.model_dir),
        pipeline_root=args.pipeline_root,
        pipeline=args.pipeline,
        tolerance=args.tolerance,
        verbose=args.verbose,
    )
    print(f"reproduced {result.recorded.model_version} in {result.summary.run_dir}")
    print(result.render())
    if not result.matches:
        print("kfstack reproduce: the reproduction differs from the record (above)", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK
