"""``kfstack clean``: removes the directories of earlier embedded runs, nothing else under the
pipeline root, and none in use (:mod:`kfstack.app.run_directory`), with their entries in the
tracking store under the root (:func:`kfstack.tracking.store.delete_runs`). A tracking server of
the team's (``--tracking-uri``, ``MLFLOW_TRACKING_URI``) keeps its runs: kfstack never deletes
there."""

from __future__ import annotations

import argparse
import os

from kfstack.app import run_directory
from kfstack.app.cli.exit_codes import EXIT_OK
from kfstack.app.cli.options import DEFAULT_PIPELINE_ROOT, Subparsers


def add_parser(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "clean", help="remove the directories of earlier embedded runs (nothing else under the root)"
    )
    parser.add_argument("--pipeline-root", default=DEFAULT_PIPELINE_ROOT, help="where the runs are")
    parser.add_argument("--keep", type=int, default=0, metavar="N", help="keep the newest N runs")
    parser.add_argument("--dry-run", action="store_true", help="only list what would be removed")
    parser.add_argument(
        "--force",
        action="store_true",
        help="also remove runs still running (their processes go on without their directory) and "
        "the symbolic links to run directories (never what they point to)",
    )
    parser.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    removed, skipped = run_directory.clean_runs(
        args.pipeline_root, keep=args.keep, dry_run=args.dry_run, force=args.force
    )
    verb = "would remove" if args.dry_run else "removed"
    for run in removed:
        print(f"{verb} {run.path}")
    for left in skipped:
        print(f"skipped {left.path}: {left.reason}")
    print(
        f"{verb} {len(removed)} run(s) under {args.pipeline_root}"
        + (f"; skipped {len(skipped)}" if skipped else "")
    )
    if removed and not args.dry_run:
        print(_tracking_cleaned(args.pipeline_root, [run.path for run in removed]))
    return EXIT_OK


def _tracking_cleaned(pipeline_root: str, run_dirs: list[str]) -> str:
    from kfstack.tracking import store

    if not os.path.isfile(store.database(pipeline_root)):
        return "no tracking store under the root: nothing tracked to remove"
    if not store.server_installed():
        return (
            f"their entries in the tracking store {store.store_dir(pipeline_root)} stay: removing "
            f"them needs the full MLflow ({store.SERVER_INSTALL_HINT})"
        )
    count = store.delete_runs(pipeline_root, run_dirs)
    return (
        f"removed {count} MLflow run(s) of theirs (and their artifacts) from {store.store_dir(pipeline_root)}"
    )
