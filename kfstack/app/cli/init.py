"""``kfstack init``: a new project, its pipeline built on kfstack's components, runnable and
tested at once (:mod:`kfstack.app.project`)."""

from __future__ import annotations

import argparse
import sys

from kfstack.app import project
from kfstack.app.cli.exit_codes import EXIT_OK
from kfstack.app.cli.options import Subparsers


def add_parser(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "init",
        help="create a new project: its pipeline on kfstack's components, runnable and tested at once",
        epilog="Refuses a directory that is not empty. `make run` and `make test` in the new project set "
        "it up, run its pipeline embedded and run its tests.",
    )
    parser.add_argument("directory", metavar="DIR", help="where the project goes (new or empty)")
    parser.add_argument("--name", help="the project's name (default: DIR's); its package and pipeline follow")
    parser.add_argument(
        "--framework",
        choices=list(project.FRAMEWORKS),
        default=project.DEFAULT_FRAMEWORK,
        help="the training code's framework",
    )
    parser.add_argument(
        "--task",
        choices=list(project.TASKS),
        default=project.DEFAULT_TASK,
        help="what the model predicts: a class of two, of three, or a number",
    )
    parser.add_argument(
        "--serving",
        choices=list(project.SERVINGS),
        default=project.DEFAULT_SERVING,
        help="; ".join(f"{kind}: {meaning}" for kind, meaning in project.SERVINGS.items()),
    )
    parser.add_argument(
        "--kfstack-source",
        metavar="PATH_OR_URL",
        help="where the project installs kfstack from: a checkout, a kfstack wheel, or a git+ URL "
        "(default: this checkout, else the release pinned)",
    )
    parser.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    planned = project.plan(
        args.directory, args.name, args.framework, args.task, args.kfstack_source, args.serving
    )
    project.create(planned)
    print(project.next_steps(planned))
    for note in project.prerequisite_notes():
        print(f"kfstack init: note: {note}", file=sys.stderr)
    return EXIT_OK
