"""The ``kfstack`` command line: compile, describe, run embedded or on a Kubeflow cluster, upload
and schedule pipelines on a KFP API server, render cluster objects, clean, open the tracking UI,
serve a model, reproduce a model from its lineage record (:mod:`kfstack.app.reproduce`).

Each command is a module of this package that owns its sub-parser (``add_parser``) and its
handler (``handle``): :mod:`~kfstack.app.cli.compile_`, :mod:`~kfstack.app.cli.list_`,
:mod:`~kfstack.app.cli.describe`, :mod:`~kfstack.app.cli.run`, :mod:`~kfstack.app.cli.upload`,
:mod:`~kfstack.app.cli.schedule`, :mod:`~kfstack.app.cli.clean`, :mod:`~kfstack.app.cli.ui`,
:mod:`~kfstack.app.cli.render`,
:mod:`~kfstack.app.cli.reproduce`, :mod:`~kfstack.app.cli.init`, :mod:`~kfstack.app.cli.serve`,
:mod:`~kfstack.app.cli.alert_receiver`.
This module assembles them and turns what a command raises into its exit code.

``compile`` imports only kfp and the pipeline modules
(docs/architecture.md#lean-imports-for-compiling): no pyspark, torch or tensorflow, so it runs in a
CI job or a laptop without them. ``upload``, ``run`` (without ``--local``) and ``schedule`` talk to
a KFP API server through ``kfp.Client`` (:mod:`kfstack.app.kfp_server`; cron expressions:
:mod:`kfstack.app.cron`).

Exit codes (one error style for every command, from :mod:`kfstack.errors`): 0 success (``upload``
of a version that is already there included); 2 bad input -- usage, an unknown pipeline or
parameter, a value a setting refuses, an output that cannot be written, a bad cron expression;
on a KFP server: unreachable, credentials refused (401/403), a pipeline, version or schedule that
is not there, a request the server refuses -- with one line naming what to fix and nothing
started; 1 a run or job that failed (``run --wait``: the cluster run ended FAILED, CANCELED or
SKIPPED, or the wait lost the server -- the run goes on there), with the failing task's own error;
130 interrupted (Ctrl-C: every process of an embedded run is stopped and its summary says
CANCELLED; a cluster run is *not* cancelled, only the wait stops); 1 with a traceback for an
unexpected error (a bug to report).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import traceback
from collections.abc import Callable

from kfstack.app.cli import (
    alert_receiver,
    clean,
    compile_,
    describe,
    init,
    list_,
    render,
    reproduce,
    run,
    schedule,
    serve,
    ui,
    upload,
)
from kfstack.app.cli.exit_codes import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK
from kfstack.app.cli.options import PASSED_ON
from kfstack.errors import BadInputError, CancelledError, KfstackError
from kfstack.version import __version__

# In the order `kfstack --help` lists them.
COMMANDS = (
    compile_,
    list_,
    describe,
    run,
    upload,
    schedule,
    clean,
    ui,
    render,
    reproduce,
    init,
    serve,
    alert_receiver,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kfstack", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--version", action="version", version=f"kfstack {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Runs one command; returns its exit code (see the module docstring)."""
    parser = build_parser()
    try:
        args, unknown = parser.parse_known_args(argv)
        # A command that hands flags it does not know to a program it starts takes them (a
        # ServingRuntime's `kfstack serve`, to which KServe appends the deployment's server
        # flags); every other command refuses them, as parse_args would.
        if unknown and not hasattr(args, PASSED_ON):
            parser.error(f"unrecognized arguments: {' '.join(unknown)}")
        if hasattr(args, PASSED_ON):
            setattr(args, PASSED_ON, unknown)
    except SystemExit as exit_:  # argparse has printed the usage line and the problem
        return EXIT_BAD_INPUT if exit_.code else EXIT_OK
    # This process's own log lines are for debugging: the console shows task lines, messages
    # and summaries (a task's logs are in its run directory).
    verbose = getattr(args, "verbose", False)
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    command: Callable[[argparse.Namespace], int] = args.func
    try:
        return command(args)
    except BadInputError as err:
        print(f"kfstack {args.command}: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (KeyboardInterrupt, CancelledError):
        print(f"kfstack {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except KfstackError as err:
        print(f"kfstack {args.command}: {type(err).__name__}: {err}", file=sys.stderr)
        return EXIT_FAILED
    except BrokenPipeError:
        # The reader went away (`kfstack describe | head`): not an error of ours. Point stdout at
        # nothing so the interpreter's final flush does not complain again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except Exception:
        traceback.print_exc()
        return EXIT_FAILED
