"""The ``kfstack`` command line: compile, describe, run embedded or on a Kubeflow cluster, upload
and schedule pipelines on a KFP API server, render cluster objects, clean, serve a model,
reproduce a model from its lineage record (:mod:`kfstack.app.reproduce`).

``compile`` imports only kfp and the pipeline modules (STYLE 9): no pyspark, torch or
tensorflow, so it runs in a CI job or a laptop without them. ``upload``, ``run`` (without
``--local``) and ``schedule`` talk to a KFP API server through ``kfp.Client``
(:mod:`kfstack.app.kfp_server`; cron expressions: :mod:`kfstack.app.cron`).

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
import datetime
import json
import logging
import os
import sys
import tempfile
import textwrap
import traceback
from collections.abc import Callable
from typing import Any

import yaml
from kfp import compiler

from kfstack import pipeline_spec, platforms
from kfstack.app import run_directory
from kfstack.app.cron import parse_cron
from kfstack.app.local_run import run_pipeline_locally
from kfstack.app.summary import CANCELLED, SUCCEEDED
from kfstack.contracts import MODEL_FORMATS
from kfstack.errors import (
    BadInputError,
    CancelledError,
    KfpAuthError,
    KfpRequestError,
    KfpServerUnavailableError,
    KfstackError,
    UsageError,
)
from kfstack.images import COMPONENT_IMAGE
from kfstack.lineage import DEFAULT_TOLERANCE
from kfstack.pipelines import chosen, entry, load_pipeline, pipeline_names, rendering
from kfstack.tuning.spec import LOCAL_BUDGET
from kfstack.version import VERSION_ENV, __version__, label_safe, pipeline_version

DEFAULT_DIST = os.path.join("dist", "pipelines")
DEFAULT_PIPELINE_ROOT = "runs"
TASK_IMAGE_HELP = (
    "the image kfstack's own tasks run in on the cluster: kfstack's launcher image with your "
    "package installed (default: the pipeline's registration's task_image, else kfstack's launcher)"
)
PIPELINE_NAME_HELP = "pipeline name (kfstack list), or module:function; optional when one is installed"
DESCRIBE_WIDTH = 96
EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130
# Stands in for the KFP run id when parameters are checked before a local run.
LOCAL_CHECK_RUN_ID = "local-check"
# ... and before a cluster run or schedule is submitted.
CLUSTER_CHECK_RUN_ID = "cluster-check"
DEFAULT_POLL_SECONDS = 10.0


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


def compile_pipelines(
    names: list[str], out_dir: str, version: str | None = None, task_image: str | None = None
) -> list[str]:
    """Compiles the named pipelines (all when empty) to YAML, each stamped with the pipeline
    version (:func:`~kfstack.version.pipeline_version`; ``version`` overrides it), kfstack's
    tasks in the pipeline's task image (``task_image``, else its registration's); returns the
    written paths.

    Raises:
        UsageError: An unknown pipeline, a malformed version or image, or ``out_dir`` is not
            writable.
    """
    if task_image is not None and (not task_image or any(c.isspace() for c in task_image)):
        raise UsageError(
            f"--task-image {task_image!r}: an image reference (registry/name:tag) without spaces"
        )
    if task_image is not None and not names:
        raise UsageError("--task-image is one pipeline's image: name the pipelines it is for")
    pipelines = [(name, load_pipeline(name)) for name in (names or pipeline_names())]
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
        registered = entry(name)
        image = task_image or registered.task_image
        if image:
            pipeline_spec.replace_task_image(documents, COMPONENT_IMAGE, image)
        else:
            # Its validate-run imports the pipeline, which kfstack's own launcher image lacks.
            print(
                f"note: {name}: kfstack's tasks run in {COMPONENT_IMAGE}, which holds kfstack alone; for a "
                "cluster, give --task-image (your launcher image, FROM kfstack's, with your package)",
                file=sys.stderr,
            )
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
    for path in compile_pipelines(args.names, args.out, args.pipeline_version, args.task_image):
        print(path)
    return EXIT_OK


def _cmd_list(args: argparse.Namespace) -> int:
    for name in pipeline_names():
        print(name)
    return EXIT_OK


def _cmd_describe(args: argparse.Namespace) -> int:
    args.name = chosen(args.name)
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


def _given(args: argparse.Namespace, flags: dict[str, str]) -> list[str]:
    """The flags among ``flags`` (flag -> attribute) set on the command line: not at their
    default, ``None``, ``False`` or an empty list (by identity: ``--poll-seconds 0`` is set)."""
    return [
        flag
        for flag, attribute in flags.items()
        if (value := getattr(args, attribute)) is not None and value is not False and value != []
    ]


# Flags of `run` that only mean something for one of its two platforms.
_LOCAL_ONLY = {"--resume": "resume", "--pipeline-root": "pipeline_root", "--verbose": "verbose"}
_CLUSTER_ONLY = {
    "--version": "version_name",
    "--experiment": "experiment",
    "--wait": "wait",
    "--poll-seconds": "poll_seconds",
    "--host": "host",
    "--namespace": "namespace",
    "--token": "token",
}


def _cmd_run(args: argparse.Namespace) -> int:
    if not args.local:
        return _run_on_cluster(args)
    cluster_only = _given(args, _CLUSTER_ONLY)
    if cluster_only:
        raise UsageError(f"{', '.join(cluster_only)}: for runs on a Kubeflow cluster; drop with --local")
    if args.pipeline_root is None:
        args.pipeline_root = DEFAULT_PIPELINE_ROOT
    resume = None
    if args.resume:
        if args.param:
            raise UsageError("--resume runs again with the interrupted run's own arguments; drop --param")
        resume, args.name, arguments = run_directory.RunDirectory.reopen(args.resume)
    else:
        args.name = chosen(args.name)
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


def check_cluster_arguments(pipeline: str, arguments: dict[str, Any]) -> None:
    """Every check a cluster run of ``pipeline`` makes of ``arguments`` before it starts a task
    (stage settings, node pools, the pipeline's rules across stages), here, before anything is
    submitted. Parameters not given take the compiled defaults, as on the cluster.

    Raises:
        UsageError, InvalidParameterError: What the run would refuse.
    """
    if arguments.get(platforms.PLATFORM_ARGUMENT, platforms.KUBERNETES) == platforms.KUBERNETES:
        rendering.render(pipeline, arguments, run_id=CLUSTER_CHECK_RUN_ID)
    else:
        rendering.run_check(pipeline)(rendering.run_parameters(pipeline, arguments))


def _run_on_cluster(args: argparse.Namespace) -> int:
    """``kfstack run`` without ``--local``: a run of an uploaded version on the KFP server."""
    from kfstack.app import kfp_server

    local_only = _given(args, _LOCAL_ONLY)
    if local_only:
        raise UsageError(
            f"{', '.join(local_only)}: only with --local (the embedded platform); a cluster run keeps "
            f"its logs and artifacts on the cluster. Nothing was submitted."
        )
    if args.summary_json and not args.wait:
        raise UsageError("--summary-json on a cluster run needs --wait (it holds the run's final state)")
    if args.poll_seconds is not None and args.poll_seconds <= 0:
        raise UsageError(f"--poll-seconds {args.poll_seconds:g}: must be positive")
    # Everything about the request is checked before a connection is made.
    args.name = chosen(args.name)
    arguments = parse_params(args.param, args.name)
    check_cluster_arguments(args.name, arguments)
    if args.summary_json:
        _writable_dir(os.path.dirname(os.path.abspath(args.summary_json)))
    experiment = args.experiment or args.name
    with kfp_server.connect(args.host, args.namespace, args.token) as client:
        ref = kfp_server.resolve_version(client, args.name, args.version_name)
        experiment_id, created = kfp_server.ensure_experiment(client, experiment)
        if created:
            print(f"created experiment {experiment} ({experiment_id})")
        started = datetime.datetime.now(datetime.UTC).strftime("%Y%m%d-%H%M%S")
        display_name = f"{args.name} {ref.version} {started}"
        run_id = kfp_server.start_run(client, ref, experiment_id, arguments, display_name)
        url = kfp_server.run_url(client, run_id)
        print(
            f"started run {run_id}: {ref.pipeline} version {ref.version} (version id {ref.version_id}), "
            f"experiment {experiment}"
        )
        print(f"  {url}", flush=True)
        if not args.wait:
            return EXIT_OK

        def task_line(task: str, state: str) -> None:
            now = datetime.datetime.now().strftime("%H:%M:%S")
            print(f"{now}  {task:<28} {state}", flush=True)

        try:
            with kfp_server.api_errors(client):
                run = kfp_server.wait_for_run(
                    client,
                    run_id,
                    on_task=task_line,
                    poll_interval_seconds=args.poll_seconds or DEFAULT_POLL_SECONDS,
                )
        except KeyboardInterrupt:
            print(
                f"kfstack run: interrupted; run {run_id} was not cancelled and keeps running on the "
                f"cluster: {url}",
                file=sys.stderr,
            )
            return EXIT_INTERRUPTED
        except (KfpServerUnavailableError, KfpAuthError, KfpRequestError) as err:
            print(
                f"kfstack run: stopped waiting for run {run_id}, which keeps running on the cluster "
                f"({url}): {err}",
                file=sys.stderr,
            )
            return EXIT_FAILED
    if args.summary_json:
        with open(args.summary_json, "w", encoding="utf-8") as f:
            json.dump(kfp_server.run_record(run, url, ref, experiment), f, indent=2)
            f.write("\n")
    print(f"run {run_id} {run.state}: {url}")
    if run.state != kfp_server.SUCCEEDED:
        error = f": {run.error.message}" if run.error and run.error.message else ""
        print(f"kfstack run: run {run_id} ended {run.state}{error}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def _cmd_upload(args: argparse.Namespace) -> int:
    from kfstack.app import kfp_server

    names = args.names or pipeline_names()
    try:
        version = pipeline_version(args.pipeline_version)
    except ValueError as err:
        raise UsageError(f"--pipeline-version: {err}") from None
    with tempfile.TemporaryDirectory(prefix="kfstack-upload-") as out_dir:
        # Every pipeline compiles before the server hears of any of them.
        paths = compile_pipelines(names, out_dir, version, args.task_image)
        if version.endswith("-dirty"):
            print(
                f"kfstack upload: note: version {version} has uncommitted changes; a later upload of "
                f"other uncommitted changes carries the same name and is skipped as already uploaded: "
                f"commit first, or pass --pipeline-version",
                file=sys.stderr,
            )
        with kfp_server.connect(args.host, args.namespace, args.token) as client:
            for name, path in zip(names, paths, strict=True):
                done = kfp_server.upload(client, name, path, version)
                ref = done.ref
                ids = f"pipeline id {ref.pipeline_id}, version id {ref.version_id}"
                if not done.new_version:
                    print(f"{name} version {ref.version} already uploaded ({ids}); nothing uploaded")
                elif done.new_pipeline:
                    print(f"{name}: created the pipeline with first version {ref.version} ({ids})")
                else:
                    print(f"{name}: uploaded version {ref.version} ({ids})")
                print(f"  {kfp_server.pipeline_url(client, ref.pipeline_id, ref.version_id)}")
    return EXIT_OK


def default_schedule_name(pipeline: str, version: str | None) -> str:
    """``<pipeline>`` for a schedule of the latest version, ``<pipeline>-<version>`` (label-safe)
    for one pinned to a version: one schedule per pipeline and pinned version unless ``--name``."""
    return f"{pipeline}-{label_safe(version)}" if version else pipeline


def _cmd_schedule(args: argparse.Namespace) -> int:
    from kfstack.app import kfp_server

    if args.list:
        return _schedule_list(args)
    if args.delete:
        extra = _given(args, {"PIPELINE": "pipeline", **_SCHEDULE_CREATE_ONLY})
        if extra:
            raise UsageError(f"--delete NAME takes no {', '.join(extra)}")
        with kfp_server.connect(args.host, args.namespace, args.token) as client:
            for recurring_run_id in kfp_server.delete_schedules(client, args.delete):
                print(f"deleted schedule {args.delete} ({recurring_run_id})")
        return EXIT_OK
    if not args.pipeline:
        raise UsageError("--cron needs the PIPELINE to schedule (kfstack list)")
    cron = parse_cron(args.cron)
    arguments = parse_params(args.param, args.pipeline)
    check_cluster_arguments(args.pipeline, arguments)
    name = args.name or default_schedule_name(args.pipeline, args.version_name)
    if cron.converted:
        print(
            f"kfstack schedule: note: 5-field cron {cron.original!r} converted to KFP's 6-field form "
            f"(seconds first): {cron.expression!r}",
            file=sys.stderr,
        )
    experiment = args.experiment or args.pipeline
    with kfp_server.connect(args.host, args.namespace, args.token) as client:
        ref = kfp_server.resolve_version(client, args.pipeline, args.version_name)
        experiment_id, created = kfp_server.ensure_experiment(client, experiment)
        if created:
            print(f"created experiment {experiment} ({experiment_id})")
        pinned = args.version_name is not None
        recurring_run_id, replaced = kfp_server.create_schedule(
            client, name, ref, pinned, experiment_id, cron.expression, arguments
        )
        version = f"version {ref.version}" if pinned else f"the latest version (now {ref.version})"
        print(
            f"scheduled {name} ({recurring_run_id}): {args.pipeline} {version}, cron {cron.expression!r}, "
            f"experiment {experiment}, at most {kfp_server.MAX_CONCURRENCY} run at a time, no catch-up"
        )
        print(f"  {kfp_server.schedule_url(client, recurring_run_id)}")
        for old in replaced:
            print(f"replaced the earlier schedule {name} ({old}): deleted once the new one existed")
    return EXIT_OK


_SCHEDULE_CREATE_ONLY = {
    "--name": "name",
    "--version": "version_name",
    "--experiment": "experiment",
    "--param": "param",
}


def _schedule_list(args: argparse.Namespace) -> int:
    from kfstack.app import kfp_server

    extra = _given(args, _SCHEDULE_CREATE_ONLY)
    if extra:
        raise UsageError(f"--list takes no {', '.join(extra)}")
    with kfp_server.connect(args.host, args.namespace, args.token) as client:
        pipeline_id = None
        if args.pipeline:
            pipeline_id = kfp_server.require_pipeline(client, args.pipeline)
        found = kfp_server.schedules(client, pipeline_id)
        if not found:
            print("no schedules" + (f" of {args.pipeline}" if args.pipeline else ""))
            return EXIT_OK
        names: dict[str, str] = {}
        rows = [("NAME", "ID", "CRON", "STATUS", "PIPELINE", "VERSION")]
        for schedule in found:
            pid = schedule.pipeline_id or ""
            if pid and pid not in names:
                names[pid] = kfp_server.pipeline_name(client, pid)
            version = "latest"
            if schedule.version_id:
                version = schedule.version_id
                if pid:
                    version = kfp_server.version_name(client, pid, schedule.version_id)
            rows.append(
                (schedule.name, schedule.id, schedule.cron, schedule.status, names.get(pid, "?"), version)
            )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    return EXIT_OK


def _cmd_init(args: argparse.Namespace) -> int:
    from kfstack.app import project

    planned = project.plan(args.directory, args.name, args.framework, args.task, args.kfstack_source)
    project.create(planned)
    print(project.next_steps(planned))
    return EXIT_OK


def _cmd_reproduce(args: argparse.Namespace) -> int:
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


def _cmd_clean(args: argparse.Namespace) -> int:
    removed = run_directory.clean_runs(args.pipeline_root, keep=args.keep, dry_run=args.dry_run)
    verb = "would remove" if args.dry_run else "removed"
    for run in removed:
        print(f"{verb} {run.path}")
    print(f"{verb} {len(removed)} run(s) under {args.pipeline_root}")
    return EXIT_OK


def _cmd_render(args: argparse.Namespace) -> int:
    args.name = chosen(args.name)
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
    """Replaces this process with kfstack's format server (the embedded platform's model
    server), so that Ctrl-C and SIGTERM reach KServe's server."""
    from kfstack import contracts
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
        f"http://127.0.0.1:{args.port}/v2/models/{args.name} (and V1 .../v1/models/{args.name}:predict "
        f"but for onnx), /metrics; Ctrl-C stops it",
        file=sys.stderr,
        flush=True,
    )
    os.execv(sys.executable, format_server.command(served, args.name, args.port, args.format, args.predictor))
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
    p_compile.add_argument("--task-image", metavar="IMAGE", help=TASK_IMAGE_HELP)
    p_compile.set_defaults(func=_cmd_compile)

    p_list = sub.add_parser("list", help="list the pipelines")
    p_list.set_defaults(func=_cmd_list)

    p_describe = sub.add_parser("describe", help="a pipeline's parameters: type, default, description")
    p_describe.add_argument("name", nargs="?", help=PIPELINE_NAME_HELP)
    p_describe.set_defaults(func=_cmd_describe)

    # The KFP API server of upload, run (without --local) and schedule.
    server = argparse.ArgumentParser(add_help=False)
    connection = server.add_argument_group(
        "KFP API server",
        "Default: what kfp.Client finds itself -- $KF_PIPELINES_ENDPOINT, in-cluster, the kubeconfig "
        "context, ~/.config/kfp/context.json (namespace).",
    )
    connection.add_argument(
        "--host",
        metavar="URL",
        help="the KFP API, e.g. http://localhost:8080 (kubectl port-forward svc/ml-pipeline-ui 8080:80 "
        "-n kubeflow) or https://kubeflow.example.com/pipeline; without a scheme kfp assumes https://",
    )
    connection.add_argument(
        "--namespace",
        help="your namespace on a multi-user KFP (pipelines, experiments, runs and schedules go there)",
    )
    connection.add_argument("--token", help="a bearer token the API server (or its proxy) accepts")

    p_run = sub.add_parser(
        "run",
        help="run a pipeline: embedded (--local) or on a Kubeflow cluster",
        parents=[server],
        epilog="The parameters, their types and defaults: kfstack describe PIPELINE. Without --local "
        "the run starts on the KFP server from an uploaded version (kfstack upload), in experiment "
        "PIPELINE unless --experiment; Ctrl-C during --wait stops waiting, not the run.",
    )
    p_run.add_argument("name", nargs="?", help=PIPELINE_NAME_HELP)
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
        default=None,
        help="--local: where the run's directory (logs, artifacts, summary.json) is created "
        f"(default {DEFAULT_PIPELINE_ROOT})",
    )
    p_run.add_argument(
        "--summary-json",
        help="also write the run summary as JSON here (on a cluster: with --wait, the run's final state)",
    )
    p_run.add_argument(
        "--resume",
        metavar="RUN_DIR",
        help="--local: run an interrupted run again in its own directory, with its arguments; steps "
        "that keep state there (the tuner's finished trials) are not repeated",
    )
    p_run.add_argument(
        "--verbose",
        action="store_true",
        help="--local: stream every task's output and kfp's own to the console",
    )
    p_run.add_argument(
        "--version",
        dest="version_name",
        metavar="VERSION",
        help="cluster: the uploaded pipeline version to run (default: the pipeline's latest)",
    )
    p_run.add_argument(
        "--experiment", help="cluster: the experiment to run in, created if absent (default: PIPELINE)"
    )
    p_run.add_argument(
        "--wait",
        action="store_true",
        help="cluster: follow the run until it ends, one line per task state change; exit 0 only "
        "when it SUCCEEDED",
    )
    p_run.add_argument(
        "--poll-seconds",
        type=float,
        default=None,
        metavar="S",
        help=f"cluster, --wait: seconds between two looks at the run (default {DEFAULT_POLL_SECONDS:g})",
    )
    p_run.set_defaults(func=_cmd_run)

    p_upload = sub.add_parser(
        "upload",
        help="compile pipelines and upload them to a KFP server as a version named by --pipeline-version",
        parents=[server],
        epilog="A new pipeline is created with this version as its first version; a version already "
        "there is not uploaded again (exit 0).",
    )
    p_upload.add_argument("names", nargs="*", help="pipelines to upload (default: all)")
    p_upload.add_argument(
        "--pipeline-version",
        default=None,
        help="the version name (default: <package version>+<git short sha>[-dirty] of this source "
        "tree, or $" + VERSION_ENV + ")",
    )
    p_upload.add_argument("--task-image", metavar="IMAGE", help=TASK_IMAGE_HELP)
    p_upload.set_defaults(func=_cmd_upload)

    p_schedule = sub.add_parser(
        "schedule",
        help="recurring runs on a KFP server: create or replace (--cron), --list, --delete",
        parents=[server],
        epilog="Cron: KFP's 6 fields, seconds first (sec min hour day-of-month month day-of-week, e.g. "
        "'0 0 3 * * *' daily at 03:00); a 5-field expression gets 0 seconds prepended (with a note). "
        "Fields: *, ? (day fields), numbers, a-b, a-b/n, */n, lists a,b, JAN-DEC, SUN-SAT. A schedule "
        "never runs twice at once and does not catch up on missed runs. Creating one with the name of "
        "an existing one replaces it.",
    )
    p_schedule.add_argument(
        "pipeline", nargs="?", metavar="PIPELINE", help="pipeline to schedule (with --list: filter)"
    )
    action = p_schedule.add_mutually_exclusive_group(required=True)
    action.add_argument("--cron", metavar="EXPR", help="create (or replace) a schedule with this cron")
    action.add_argument("--list", action="store_true", help="list the schedules (of PIPELINE if given)")
    action.add_argument("--delete", metavar="NAME", help="delete the schedule named NAME")
    p_schedule.add_argument(
        "--name",
        help="the schedule's name (default: PIPELINE, or PIPELINE-VERSION when --version pins one)",
    )
    p_schedule.add_argument(
        "--version",
        dest="version_name",
        metavar="VERSION",
        help="pin this uploaded version (default: each run takes the pipeline's latest version)",
    )
    p_schedule.add_argument(
        "--experiment", help="the experiment its runs go to, created if absent (default: PIPELINE)"
    )
    p_schedule.add_argument(
        "--param", action="append", default=[], metavar="NAME=VALUE", help="pipeline parameter (repeatable)"
    )
    p_schedule.set_defaults(func=_cmd_schedule)

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
    p_render.add_argument("name", nargs="?", help=PIPELINE_NAME_HELP)
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

    p_reproduce = sub.add_parser(
        "reproduce",
        help="train a model again from its lineage record on the embedded platform and compare",
        epilog="Refuses when the checked-out code is not the recorded pipeline version.",
    )
    p_reproduce.add_argument("model_dir", metavar="MODEL_DIR", help="a model directory with its lineage.json")
    p_reproduce.add_argument(
        "--pipeline", metavar="NAME", help="the pipeline that made it; optional when one is installed"
    )
    p_reproduce.add_argument(
        "--pipeline-root", default=DEFAULT_PIPELINE_ROOT, help="where the reproduction's run directory goes"
    )
    p_reproduce.add_argument(
        "--tolerance",
        type=float,
        default=DEFAULT_TOLERANCE,
        help=f"largest absolute difference of a metric that still matches (default {DEFAULT_TOLERANCE})",
    )
    p_reproduce.add_argument("--verbose", action="store_true", help="stream every task's output")
    p_reproduce.set_defaults(func=_cmd_reproduce)

    from kfstack.app.project import DEFAULT_FRAMEWORK, DEFAULT_TASK, FRAMEWORKS, TASKS

    p_init = sub.add_parser(
        "init",
        help="create a new project: its pipeline on kfstack's components, runnable and tested at once",
        epilog="Refuses a directory that is not empty. `make run` and `make test` in the new project set "
        "it up, run its pipeline embedded and run its tests.",
    )
    p_init.add_argument("directory", metavar="DIR", help="where the project goes (new or empty)")
    p_init.add_argument("--name", help="the project's name (default: DIR's); its package and pipeline follow")
    p_init.add_argument(
        "--framework",
        choices=list(FRAMEWORKS),
        default=DEFAULT_FRAMEWORK,
        help="the training code's framework",
    )
    p_init.add_argument("--task", choices=list(TASKS), default=DEFAULT_TASK, help="the classification task")
    p_init.add_argument(
        "--kfstack-source",
        metavar="PATH_OR_URL",
        help="where the project installs kfstack from: a checkout, a kfstack wheel, or a git+ URL "
        "(default: this checkout, else the release pinned)",
    )
    p_init.set_defaults(func=_cmd_init)

    p_serve = sub.add_parser(
        "serve",
        help="serve a trained model directory as its KServe runtime would (V1/V2 HTTP, /metrics)",
        epilog="KServe's server listens on every interface (0.0.0.0) of this machine.",
    )
    p_serve.add_argument("--model", required=True, metavar="DIR", help="a trained model directory")
    p_serve.add_argument(
        "--format", required=True, choices=MODEL_FORMATS, help="its format (custom: a team's kserve.Model)"
    )
    p_serve.add_argument(
        "--predictor", default="", metavar="MODULE:CLASS", help="custom: the kserve.Model class"
    )
    p_serve.add_argument("--port", type=int, default=8080, help="HTTP port (default 8080)")
    p_serve.add_argument("--name", default="model", help="the model's name in the URLs (default model)")
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
