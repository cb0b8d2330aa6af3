"""``kfstack run``: a pipeline run on the embedded platform (``--local``, :mod:`kfstack.app.local_run`)
or on a Kubeflow cluster, from a version uploaded to its KFP API server
(:mod:`kfstack.app.kfp_server`)."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
from typing import Any

from kfstack.app import run_directory
from kfstack.app.cli.exit_codes import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK
from kfstack.app.cli.options import (
    DEFAULT_PIPELINE_ROOT,
    KFP_SERVER_FLAGS,
    PIPELINE_NAME_HELP,
    RUN_TARGET_FLAGS,
    Subparsers,
    add_param_option,
    add_run_target_options,
    flags_given,
    kfp_server_options,
    kfp_token,
    resolve_run_target,
    run_service_account,
    writable_dir,
)
from kfstack.app.cli.parameters import cluster_run_arguments, embedded_budget, parse_params
from kfstack.app.local_run import run_pipeline_locally
from kfstack.app.summary import CANCELLED, SUCCEEDED
from kfstack.errors import KfpAuthError, KfpRequestError, KfpServerUnavailableError, UsageError
from kfstack.pipelines import chosen, load_pipeline, rendering
from kfstack.uris import URI_LOCATIONS_ENV

# Stands in for the KFP run id when parameters are checked before a local run.
LOCAL_CHECK_RUN_ID = "local-check"
DEFAULT_POLL_SECONDS = 10.0

# Flags of `run` that only mean something for one of its two platforms.
_LOCAL_ONLY = {
    "--resume": "resume",
    "--pipeline-root": "pipeline_root",
    "--verbose": "verbose",
    "--no-cache": "no_cache",
    "--tracking-uri": "tracking_uri",
    "--no-tracking": "no_tracking",
}
_CLUSTER_ONLY = {
    **RUN_TARGET_FLAGS,
    "--wait": "wait",
    "--poll-seconds": "poll_seconds",
    **KFP_SERVER_FLAGS,
}


def add_parser(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "run",
        help="run a pipeline: embedded (--local) or on a Kubeflow cluster",
        parents=[kfp_server_options()],
        epilog="The parameters, their types and defaults: kfstack describe PIPELINE. Without --local "
        "the run starts on the KFP server from an uploaded version (kfstack upload), in experiment "
        "PIPELINE unless --experiment; Ctrl-C during --wait stops waiting, not the run.",
    )
    parser.add_argument("name", nargs="?", help=PIPELINE_NAME_HELP)
    parser.add_argument(
        "--local", action="store_true", help="run on the embedded platform (kfp.local, no cluster)"
    )
    add_param_option(parser, "pipeline parameter (repeatable; see kfstack describe PIPELINE)")
    parser.add_argument(
        "--pipeline-root",
        default=None,
        help="--local: where the run's directory (logs, artifacts, summary.json) is created "
        f"(default {DEFAULT_PIPELINE_ROOT})",
    )
    parser.add_argument(
        "--summary-json",
        help="also write the run summary as JSON here (on a cluster: with --wait, the run's final state)",
    )
    parser.add_argument(
        "--resume",
        metavar="RUN_DIR",
        help="--local: run an interrupted run again in its own directory, with its arguments; steps "
        "that keep state there (the tuner's finished trials) are not repeated",
    )
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="--local: stream every task's output and kfp's own to the console",
    )
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help="--local: run every step, none answered from an earlier run under the root that ran "
        "it with the same inputs and code (the step cache, on by default as KFP's is; a cluster "
        "version's steps are cached as compiled)",
    )
    parser.add_argument(
        "--tracking-uri",
        metavar="URI",
        help="--local: the MLflow tracking server to track the run in (default: $MLFLOW_TRACKING_URI, "
        "else the store under the pipeline root, which `kfstack ui` opens; docs/tracking.md)",
    )
    parser.add_argument(
        "--no-tracking",
        action="store_true",
        help="--local: track nothing in MLflow (a cluster run tracks as its environment says)",
    )
    parser.add_argument(
        "--uri-locations",
        action="store_true",
        help="--local: tell the steps' code its locations as URIs, as a cluster does (s3:// "
        "ones of an S3 server on loopback for the training code, file:// ones for Spark), so that "
        f"code taking a location for a local path fails here too (also: {URI_LOCATIONS_ENV}=1)",
    )
    add_run_target_options(
        parser,
        version_help="the uploaded pipeline version to run (default: the pipeline's latest)",
        experiment_help="the experiment to run in, created if absent (default: PIPELINE)",
        help_prefix="cluster: ",
    )
    parser.add_argument(
        "--wait",
        action="store_true",
        help="cluster: follow the run until it ends, one line per task state change; exit 0 only "
        "when it SUCCEEDED",
    )
    parser.add_argument(
        "--poll-seconds",
        type=float,
        default=None,
        metavar="S",
        help=f"cluster, --wait: seconds between two looks at the run (default {DEFAULT_POLL_SECONDS:g})",
    )
    parser.set_defaults(func=handle)


def local_arguments(pipeline: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """``arguments`` for a run on this machine: ``platform=local`` and, for every tuning budget
    parameter the user did not set, the local budget (the compiled defaults suit a cluster).

    Raises:
        UsageError: ``--param platform=`` something else.
    """
    if arguments.get("platform", "local") != "local":
        raise UsageError(f"run --local sets platform=local; drop --param platform={arguments['platform']}")
    return {**embedded_budget(load_pipeline(pipeline)), **arguments, "platform": "local"}


def handle(args: argparse.Namespace) -> int:
    if not args.local:
        return _run_on_cluster(args)
    cluster_only = flags_given(args, _CLUSTER_ONLY)
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
        writable_dir(os.path.dirname(os.path.abspath(args.summary_json)))
    if args.uri_locations:
        os.environ[URI_LOCATIONS_ENV] = "1"  # the run's task processes inherit it
    summary = run_pipeline_locally(
        args.name,
        arguments,
        pipeline_root=writable_dir(args.pipeline_root),
        verbose=args.verbose,
        resume=resume,
        cache=not args.no_cache,
        track=not args.no_tracking,
        tracking_uri=args.tracking_uri,
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


def _run_on_cluster(args: argparse.Namespace) -> int:
    """``kfstack run`` without ``--local``: a run of an uploaded version on the KFP server."""
    from kfstack.app.kfp_server import connection, runs

    local_only = flags_given(args, _LOCAL_ONLY)
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
    arguments = cluster_run_arguments(args.name, parse_params(args.param, args.name), args.env)
    service_account = run_service_account(args)
    if args.summary_json:
        writable_dir(os.path.dirname(os.path.abspath(args.summary_json)))
    with connection.connect(args.host, args.namespace, kfp_token(args)) as client:
        ref, experiment, experiment_id = resolve_run_target(client, args.name, args)
        started = datetime.datetime.now(datetime.UTC).strftime("%Y%m%d-%H%M%S")
        display_name = f"{args.name} {ref.version} {started}"
        run_id = runs.start_run(client, ref, experiment_id, arguments, display_name, service_account)
        url = runs.run_url(client, run_id)
        account = f", service account {service_account}" if service_account else ""
        print(
            f"started run {run_id}: {ref.pipeline} version {ref.version} (version id {ref.version_id}), "
            f"experiment {experiment}{account}"
        )
        print(f"  {url}", flush=True)
        if not args.wait:
            return EXIT_OK

        def task_line(task: str, state: str) -> None:
            now = datetime.datetime.now().strftime("%H:%M:%S")
            print(f"{now}  {task:<28} {state}", flush=True)

        try:
            with connection.api_errors(client):
                run = runs.wait_for_run(
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
            json.dump(runs.run_record(run, url, ref, experiment), f, indent=2)
            f.write("\n")
    print(f"run {run_id} {run.state}: {url}")
    if run.state != runs.SUCCEEDED:
        error = f": {run.error.message}" if run.error and run.error.message else ""
        print(f"kfstack run: run {run_id} ended {run.state}{error}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK
