"""The ``kfstack`` command line: compile, describe, run embedded, render cluster objects, clean,
serve a model.

``compile`` imports only kfp and the pipeline modules (STYLE 9): no pyspark, torch or
tensorflow, so it runs in a CI job or a laptop without them.

Exit codes (one error style for every command, from :mod:`kfstack.errors`): 0 success; 2 bad
input -- usage, an unknown pipeline or parameter, a value a setting refuses, an output that
cannot be written -- with one line naming what to fix and nothing started; 1 a run or job that
failed, with the failing task's own error; 130 interrupted (Ctrl-C: every process of the run is
stopped and its summary says CANCELLED); 1 with a traceback for an unexpected error (a bug to
report).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import textwrap
import traceback
from collections.abc import Callable
from typing import Any

import yaml
from kfp import compiler

from kfstack import pipeline_spec
from kfstack.app import run_directory
from kfstack.app.local_run import run_pipeline_locally
from kfstack.app.summary import CANCELLED, SUCCEEDED
from kfstack.components.serving import predictor
from kfstack.errors import BadInputError, CancelledError, KfstackError, UsageError
from kfstack.flights.scoring import MODEL_DIR_FILES
from kfstack.pipelines import DEFAULT_PIPELINE, PIPELINES, load_pipeline, rendering
from kfstack.tuning.spec import LOCAL_BUDGET
from kfstack.version import VERSION_ENV, __version__, label_safe, pipeline_version

DEFAULT_DIST = os.path.join("dist", "pipelines")
DEFAULT_PIPELINE_ROOT = "runs"
DESCRIBE_WIDTH = 96
EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130
# Stands in for the KFP run id when parameters are checked before a local run.
LOCAL_CHECK_RUN_ID = "local-check"


def compiled_path(out_dir: str, name: str, version: str) -> str:
    """Where ``kfstack compile`` writes pipeline ``name``: ``<out>/<name>-<version>.yaml``
    (the version :func:`~kfstack.version.label_safe`, a file name without ``+``)."""
    return os.path.join(out_dir, f"{name}-{label_safe(version)}.yaml")


def _writable_dir(path: str) -> str:
    """Creates ``path`` if needed.

    Raises:
        UsageError: It cannot be created or written (a file is in the way, no permission).
    """
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as err:
        raise UsageError(f"cannot write to {path}: {err.strerror or err}") from err
    if not os.access(path, os.W_OK):
        raise UsageError(f"cannot write to {path}: permission denied")
    return path


def compile_pipelines(names: list[str], out_dir: str, version: str | None = None) -> list[str]:
    """Compiles the named pipelines (all when empty) to YAML, each stamped with the pipeline
    version (:func:`~kfstack.version.pipeline_version`; ``version`` overrides it); returns the
    written paths.

    Raises:
        UsageError: An unknown pipeline, a malformed version, or ``out_dir`` is not writable.
    """
    pipelines = [(name, load_pipeline(name)) for name in (names or sorted(PIPELINES))]
    try:
        stamped = pipeline_version(version)
    except ValueError as err:
        raise UsageError(f"--pipeline-version: {err}") from None
    _writable_dir(out_dir)
    written = []
    for name, pipeline_func in pipelines:
        path = compiled_path(out_dir, name, stamped)
        compiler.Compiler().compile(pipeline_func, package_path=path)
        with open(path, encoding="utf-8") as f:
            documents = [d for d in yaml.safe_load_all(f) if d]
        pipeline_spec.stamp_version(documents, stamped, label_safe(stamped), VERSION_ENV)
        with open(path, "w", encoding="utf-8") as f:
            yaml.safe_dump_all(documents, f, sort_keys=False)
        written.append(path)
    return written


def parse_params(pairs: list[str], pipeline: str) -> dict[str, Any]:
    """Turns ``k=v`` strings into typed arguments of ``pipeline``, by its signature's types.

    Raises:
        UsageError: A malformed pair, an unknown name or a value of the wrong type -- before
            anything runs.
    """
    types = rendering.parameter_types(load_pipeline(pipeline))
    arguments: dict[str, Any] = {}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        if not sep or not name:
            raise UsageError(f"--param {pair!r}: expected NAME=VALUE")
        if name not in types:
            raise UsageError(f"--param {name}: unknown parameter of {pipeline}; known: {', '.join(types)}")
        arguments[name] = rendering.convert(f"--param {name}", raw, types[name])
    return arguments


def local_arguments(pipeline: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """``arguments`` for a run on this machine: ``platform=local`` and, for every tuning budget
    parameter the user did not set, the local budget (the compiled defaults suit a cluster).

    Raises:
        UsageError: ``--param platform=`` something else.
    """
    if arguments.get("platform", "local") != "local":
        raise UsageError(f"run --local sets platform=local; drop --param platform={arguments['platform']}")
    parameters = rendering.parameter_types(load_pipeline(pipeline))
    budget = {name: value for name, value in LOCAL_BUDGET.items() if name in parameters}
    return {**budget, **arguments, "platform": "local"}


def _cmd_compile(args: argparse.Namespace) -> int:
    for path in compile_pipelines(args.names, args.out, args.pipeline_version):
        print(path)
    return EXIT_OK


def _cmd_list(args: argparse.Namespace) -> int:
    for name in sorted(PIPELINES):
        print(name)
    return EXIT_OK


def _cmd_describe(args: argparse.Namespace) -> int:
    spec = rendering.compiled_spec(load_pipeline(args.name))
    info = spec.get("pipelineInfo", {})
    print(info.get("name", args.name))
    if info.get("description"):
        print(textwrap.fill(info["description"], width=DESCRIBE_WIDTH))
    print("\nparameters (set with --param NAME=VALUE):")
    for parameter in pipeline_spec.pipeline_parameters(spec):
        default = "required" if parameter.required else f"default {parameter.default!r}"
        print(f"  {parameter.name}  ({parameter.type}, {default})")
        if parameter.description:
            print(
                textwrap.fill(
                    parameter.description,
                    width=DESCRIBE_WIDTH,
                    initial_indent=" " * 6,
                    subsequent_indent=" " * 6,
                )
            )
    return EXIT_OK


def _cmd_run(args: argparse.Namespace) -> int:
    if not args.local:
        raise UsageError(
            "only --local (the embedded platform) is available; running on a "
            "Kubeflow cluster comes with the KFP client commands. Nothing was submitted."
        )
    resume = None
    if args.resume:
        if args.param:
            raise UsageError("--resume runs again with the interrupted run's own arguments; drop --param")
        resume, args.name, arguments = run_directory.RunDirectory.reopen(args.resume)
    else:
        arguments = local_arguments(args.name, parse_params(args.param, args.name))
    # Every check a cluster run makes (node pools, Spark memory notation, elastic bounds, ...),
    # before a run directory or a process exists.
    rendering.render(args.name, arguments, run_id=LOCAL_CHECK_RUN_ID)
    if args.summary_json:
        _writable_dir(os.path.dirname(os.path.abspath(args.summary_json)))
    summary = run_pipeline_locally(
        args.name,
        arguments,
        pipeline_root=_writable_dir(args.pipeline_root),
        verbose=args.verbose,
        resume=resume,
    )
    if args.summary_json:
        summary.write_json(args.summary_json)
    if summary.status == CANCELLED:
        print(f"kfstack run: cancelled; every process stopped; summary in {summary.run_dir}", file=sys.stderr)
        return EXIT_INTERRUPTED
    print("\n" + summary.render())
    if summary.status != SUCCEEDED:
        print(f"kfstack run: {summary.error}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def _cmd_clean(args: argparse.Namespace) -> int:
    removed = run_directory.clean_runs(args.pipeline_root, keep=args.keep, dry_run=args.dry_run)
    verb = "would remove" if args.dry_run else "removed"
    for run in removed:
        print(f"{verb} {run.path}")
    print(f"{verb} {len(removed)} run(s) under {args.pipeline_root}")
    return EXIT_OK


def _cmd_render(args: argparse.Namespace) -> int:
    rendered = rendering.render(args.name, parse_params(args.param, args.name), run_id=args.run_id)
    for path in rendering.write_objects(rendered, _writable_dir(args.out)):
        print(path)
    alternatives = sum(len(task.objects) for task in rendered if task.when)
    if alternatives:
        # stdout lists the files; the caveat goes to stderr, where a pipe does not take it.
        print(
            f"kfstack render: {alternatives} object(s) start with '# only when:' -- the run creates "
            f"them only under that condition (alternatives such as training_api=auto's TrainJob and "
            f"PyTorchJob among them): apply only those whose condition holds, or render with an "
            f"explicit choice (--param training_api=v1 or trainer-v2)",
            file=sys.stderr,
        )
    return EXIT_OK


def _cmd_serve(args: argparse.Namespace) -> int:
    """Replaces this process with the predictor, so that Ctrl-C and SIGTERM reach KServe's server."""
    model_dir = os.path.abspath(args.model)
    missing = [name for name in MODEL_DIR_FILES if not os.path.isfile(os.path.join(model_dir, name))]
    if missing:
        raise UsageError(
            f"--model {args.model}: not a trained model directory ({', '.join(missing)} missing); pass a "
            f"train-model 'model' artifact, e.g. runs/<run>/artifacts/<...>/train-model/model"
        )
    print(
        f"kfstack serve: {model_dir} as '{args.name}' on port {args.port} -- V1 "
        f"http://127.0.0.1:{args.port}/v1/models/{args.name}:predict, V2 .../v2/models/{args.name}/infer, "
        f"/metrics; Ctrl-C stops it",
        file=sys.stderr,
        flush=True,
    )
    os.execv(sys.executable, predictor.command(model_dir, args.name, args.port))
    return EXIT_FAILED  # not reached: execv replaced this process


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kfstack", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--version", action="version", version=f"kfstack {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p_compile = sub.add_parser("compile", help="compile pipelines to YAML (dist/pipelines)")
    p_compile.add_argument("names", nargs="*", help="pipelines to compile (default: all)")
    p_compile.add_argument("--out", default=DEFAULT_DIST, help="output directory")
    p_compile.add_argument(
        "--pipeline-version",
        default=None,
        help="the version stamped into the pipelines (default: <package version>+<git short sha>"
        "[-dirty] of this source tree, or $" + VERSION_ENV + ")",
    )
    p_compile.set_defaults(func=_cmd_compile)

    p_list = sub.add_parser("list", help="list the pipelines")
    p_list.set_defaults(func=_cmd_list)

    p_describe = sub.add_parser("describe", help="a pipeline's parameters: type, default, description")
    p_describe.add_argument("name", nargs="?", default=DEFAULT_PIPELINE, help="pipeline name")
    p_describe.set_defaults(func=_cmd_describe)

    p_run = sub.add_parser(
        "run",
        help="run a pipeline",
        epilog="The parameters, their types and defaults: kfstack describe PIPELINE.",
    )
    p_run.add_argument("name", nargs="?", default=DEFAULT_PIPELINE, help="pipeline name")
    p_run.add_argument(
        "--local", action="store_true", help="run on the embedded platform (kfp.local, no cluster)"
    )
    p_run.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="pipeline parameter (repeatable; see kfstack describe PIPELINE)",
    )
    p_run.add_argument(
        "--pipeline-root",
        default=DEFAULT_PIPELINE_ROOT,
        help="where the run's directory (logs, artifacts, summary.json) is created",
    )
    p_run.add_argument("--summary-json", help="also write the run summary as JSON here")
    p_run.add_argument(
        "--resume",
        metavar="RUN_DIR",
        help="run an interrupted run again in its own directory, with its arguments; steps that "
        "keep state there (the tuner's finished trials) are not repeated",
    )
    p_run.add_argument(
        "--verbose", action="store_true", help="stream every task's output and kfp's own to the console"
    )
    p_run.set_defaults(func=_cmd_run)

    p_clean = sub.add_parser(
        "clean", help="remove the directories of earlier embedded runs (nothing else under the root)"
    )
    p_clean.add_argument("--pipeline-root", default=DEFAULT_PIPELINE_ROOT, help="where the runs are")
    p_clean.add_argument("--keep", type=int, default=0, metavar="N", help="keep the newest N runs")
    p_clean.add_argument("--dry-run", action="store_true", help="only list what would be removed")
    p_clean.set_defaults(func=_cmd_clean)

    p_render = sub.add_parser(
        "render", help="write the Kubernetes objects a kubernetes run would create (review, GitOps)"
    )
    p_render.add_argument("name", nargs="?", default=DEFAULT_PIPELINE, help="pipeline name")
    p_render.add_argument(
        "--out",
        required=True,
        help="directory for one YAML file per object: new, empty, or an earlier render's (replaced whole)",
    )
    p_render.add_argument(
        "--param", action="append", default=[], metavar="NAME=VALUE", help="pipeline parameter (repeatable)"
    )
    p_render.add_argument(
        "--run-id", default="render", help="stands in for the KFP run id in names and labels"
    )
    p_render.set_defaults(func=_cmd_render)

    p_serve = sub.add_parser(
        "serve",
        help="serve a trained model directory with KServe's model server (V1 and V2 HTTP, /metrics)",
        epilog="KServe's server listens on every interface (0.0.0.0) of this machine.",
    )
    p_serve.add_argument("--model", required=True, metavar="DIR", help="a train-model 'model' artifact")
    p_serve.add_argument("--port", type=int, default=8080, help="HTTP port (default 8080)")
    p_serve.add_argument("--name", default=predictor.DEFAULT_MODEL_NAME, help="the model's name in the URLs")
    p_serve.set_defaults(func=_cmd_serve)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Runs one command; returns its exit code (see the module docstring)."""
    try:
        args = build_parser().parse_args(argv)
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


if __name__ == "__main__":
    sys.exit(main())
