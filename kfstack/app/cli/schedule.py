"""``kfstack schedule``: recurring runs of a pipeline on a KFP API server -- create or replace
(``--cron``, :mod:`kfstack.app.cron`), ``--list``, ``--delete``."""

from __future__ import annotations

import argparse
import sys

from kfstack.app.cli.exit_codes import EXIT_OK
from kfstack.app.cli.options import (
    RUN_TARGET_FLAGS,
    Subparsers,
    add_param_option,
    add_run_target_options,
    flags_given,
    kfp_server_options,
    kfp_token,
    resolve_run_target,
    run_service_account,
)
from kfstack.app.cli.parameters import cluster_run_arguments, parse_params
from kfstack.app.cron import parse_cron
from kfstack.errors import UsageError
from kfstack.version import label_safe

# Flags that only mean something when a schedule is created.
_SCHEDULE_CREATE_ONLY = {"--name": "name", **RUN_TARGET_FLAGS, "--param": "param"}


def add_parser(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "schedule",
        help="recurring runs on a KFP server: create or replace (--cron), --list, --delete",
        parents=[kfp_server_options()],
        epilog="Cron: KFP's 6 fields, seconds first (sec min hour day-of-month month day-of-week, e.g. "
        "'0 0 3 * * *' daily at 03:00); a 5-field expression gets 0 seconds prepended (with a note). "
        "Fields: *, ? (day fields), numbers, a-b, a-b/n, */n, lists a,b, JAN-DEC, SUN-SAT. A schedule "
        "never runs twice at once and does not catch up on missed runs. Creating one with the name of "
        "an existing one replaces it.",
    )
    parser.add_argument(
        "pipeline", nargs="?", metavar="PIPELINE", help="pipeline to schedule (with --list: filter)"
    )
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--cron", metavar="EXPR", help="create (or replace) a schedule with this cron")
    action.add_argument("--list", action="store_true", help="list the schedules (of PIPELINE if given)")
    action.add_argument("--delete", metavar="NAME", help="delete the schedule named NAME")
    parser.add_argument(
        "--name",
        help="the schedule's name (default: PIPELINE, or PIPELINE-VERSION when --version pins one)",
    )
    add_run_target_options(
        parser,
        version_help="pin this uploaded version (default: each run takes the pipeline's latest version)",
        experiment_help="the experiment its runs go to, created if absent (default: PIPELINE)",
    )
    add_param_option(parser, "pipeline parameter (repeatable)")
    parser.set_defaults(func=handle)


def default_schedule_name(pipeline: str, version: str | None) -> str:
    """``<pipeline>`` for a schedule of the latest version, ``<pipeline>-<version>`` (label-safe)
    for one pinned to a version: one schedule per pipeline and pinned version unless ``--name``."""
    return f"{pipeline}-{label_safe(version)}" if version else pipeline


def handle(args: argparse.Namespace) -> int:
    from kfstack.app.kfp_server import connection, recurring_runs

    if args.list:
        return _list_schedules(args)
    if args.delete:
        extra = flags_given(args, {"PIPELINE": "pipeline", **_SCHEDULE_CREATE_ONLY})
        if extra:
            raise UsageError(f"--delete NAME takes no {', '.join(extra)}")
        with connection.connect(args.host, args.namespace, kfp_token(args)) as client:
            for recurring_run_id in recurring_runs.delete_schedules(client, args.delete):
                print(f"deleted schedule {args.delete} ({recurring_run_id})")
        return EXIT_OK
    if not args.pipeline:
        raise UsageError("--cron needs the PIPELINE to schedule (kfstack list)")
    cron = parse_cron(args.cron)
    arguments = cluster_run_arguments(args.pipeline, parse_params(args.param, args.pipeline), args.env)
    service_account = run_service_account(args)
    name = args.name or default_schedule_name(args.pipeline, args.version_name)
    if cron.converted:
        print(
            f"kfstack schedule: note: 5-field cron {cron.original!r} converted to KFP's 6-field form "
            f"(seconds first): {cron.expression!r}",
            file=sys.stderr,
        )
    with connection.connect(args.host, args.namespace, kfp_token(args)) as client:
        ref, experiment, experiment_id = resolve_run_target(client, args.pipeline, args)
        pinned = args.version_name is not None
        recurring_run_id, replaced = recurring_runs.create_schedule(
            client, name, ref, pinned, experiment_id, cron.expression, arguments, service_account
        )
        version = f"version {ref.version}" if pinned else f"the latest version (now {ref.version})"
        account = f", service account {service_account}" if service_account else ""
        print(
            f"scheduled {name} ({recurring_run_id}): {args.pipeline} {version}, cron {cron.expression!r}, "
            f"experiment {experiment}{account}, at most {recurring_runs.MAX_CONCURRENCY} run at a time, "
            f"no catch-up"
        )
        print(f"  {recurring_runs.schedule_url(client, recurring_run_id)}")
        for old in replaced:
            print(f"replaced the earlier schedule {name} ({old}): deleted once the new one existed")
    return EXIT_OK


def _list_schedules(args: argparse.Namespace) -> int:
    from kfstack.app.kfp_server import connection, pipelines, recurring_runs

    extra = flags_given(args, _SCHEDULE_CREATE_ONLY)
    if extra:
        raise UsageError(f"--list takes no {', '.join(extra)}")
    with connection.connect(args.host, args.namespace, kfp_token(args)) as client:
        pipeline_id = None
        if args.pipeline:
            pipeline_id = pipelines.require_pipeline(client, args.pipeline)
        found = recurring_runs.schedules(client, pipeline_id)
        if not found:
            print("no schedules" + (f" of {args.pipeline}" if args.pipeline else ""))
            return EXIT_OK
        names: dict[str, str] = {}
        rows = [("NAME", "ID", "CRON", "STATUS", "PIPELINE", "VERSION", "SERVICE-ACCOUNT")]
        for schedule in found:
            pid = schedule.pipeline_id or ""
            if pid and pid not in names:
                names[pid] = pipelines.pipeline_name(client, pid)
            version = "latest"
            if schedule.version_id:
                version = schedule.version_id
                if pid:
                    version = pipelines.version_name(client, pid, schedule.version_id)
            rows.append(
                (
                    schedule.name,
                    schedule.id,
                    schedule.cron,
                    schedule.status,
                    names.get(pid, "?"),
                    version,
                    schedule.service_account or "-",
                )
            )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    return EXIT_OK
