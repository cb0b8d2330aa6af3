"""``kfstack list``: the names of the installed pipelines. (The module's name keeps clear of
the builtin ``list``.)"""

from __future__ import annotations

import argparse

from kfstack.app.cli.exit_codes import EXIT_OK
from kfstack.app.cli.options import Subparsers
from kfstack.pipelines import pipeline_names


def add_parser(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser("list", help="list the pipelines")
    parser.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    for name in pipeline_names():
        print(name)
    return EXIT_OK
