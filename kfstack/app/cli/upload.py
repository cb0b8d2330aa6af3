"""``kfstack upload``: compiles pipelines and uploads them to a KFP API server as the version
named by ``--pipeline-version``, and keeps the schedules that follow the latest version working
(:func:`keep_schedules_working`)."""

from __future__ import annotations

import argparse
import sys
import tempfile
import warnings
from typing import Any

from kfstack import pipeline_spec
from kfstack.app import cron as cron_module
from kfstack.app.cli.compile_ import compile_pipelines, stamped_version
from kfstack.app.cli.exit_codes import EXIT_OK
from kfstack.app.cli.options import Subparsers, add_compiled_version_options, kfp_server_options, kfp_token
from kfstack.errors import InvalidParameterError, UsageError
from kfstack.pipelines import environments, load_pipeline, pipeline_names, rendering, run_form
from kfstack.settings import SETTINGS_OVERRIDES
from kfstack.version import DIRTY_SUFFIX


def add_parser(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "upload",
        help="compile pipelines and upload them to a KFP server as a version named by --pipeline-version",
        parents=[kfp_server_options()],
        epilog="A new pipeline is created with this version as its first version; a version already "
        "there is not uploaded again (exit 0). A schedule following the latest version that passes "
        "settings as parameters (made before the run form) is created again with them in "
        "settings_overrides (deprecated; until 0.2).",
    )
    parser.add_argument("names", nargs="*", help="pipelines to upload (default: all)")
    add_compiled_version_options(parser, "the version name")
    parser.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from kfstack.app.kfp_server import connection, pipelines

    names = args.names or pipeline_names()
    environment = environments.load_environment(args.env) if args.env else None
    version = stamped_version(args.pipeline_version)
    # The name on the server says whose defaults the version has; its tasks carry `version`.
    uploaded_as = environments.versioned(version, environment)
    with tempfile.TemporaryDirectory(prefix="kfstack-upload-") as out_dir:
        # Every pipeline compiles (and its environment's defaults are checked) before the server
        # hears of any of them.
        paths = compile_pipelines(names, out_dir, version, args.task_image, environment)
        if version.endswith(DIRTY_SUFFIX):
            print(
                f"kfstack upload: note: version {version} has uncommitted changes; a later upload of "
                f"other uncommitted changes carries the same name and is skipped as already uploaded: "
                f"commit first, or pass --pipeline-version",
                file=sys.stderr,
            )
        with connection.connect(args.host, args.namespace, kfp_token(args)) as client:
            for name, path in zip(names, paths, strict=True):
                done = pipelines.upload(client, name, path, uploaded_as)
                ref = done.ref
                ids = f"pipeline id {ref.pipeline_id}, version id {ref.version_id}"
                if not done.new_version:
                    print(f"{name} version {ref.version} already uploaded ({ids}); nothing uploaded")
                elif done.new_pipeline:
                    print(f"{name}: created the pipeline with first version {ref.version} ({ids})")
                else:
                    print(f"{name}: uploaded version {ref.version} ({ids})")
                print(f"  {pipelines.pipeline_url(client, ref.pipeline_id, ref.version_id)}")
                if done.new_version and not done.new_pipeline:
                    keep_schedules_working(client, name, ref, path, environment)
    return EXIT_OK


def keep_schedules_working(
    client: Any, name: str, ref: Any, path: str, environment: environments.Environment | None
) -> None:
    """Schedules of ``name`` that follow its latest version (now ``ref``, compiled at ``path``)
    and pass a parameter that version does not take: a setting (a schedule made before the run
    form) or a parameter's earlier name. KFP would refuse each of their runs, so each is created
    again with those settings in ``settings_overrides`` and current names, with a deprecation
    warning: kfstack does this in 0.1.x (CHANGELOG.md, "Upgrading"). One it cannot move (a
    setting compiled in with another value, an interval trigger) is left as it is and named.
    A schedule pinned to a version keeps running that version and is not touched."""
    from kfstack.app.kfp_server import recurring_runs

    with open(path) as compiled_file:
        spec = next(d for d in pipeline_spec.read_documents(compiled_file) if "root" in d)
    taken = {parameter.name for parameter in pipeline_spec.pipeline_parameters(spec)}
    following = [s for s in recurring_runs.schedules(client, ref.pipeline_id) if s.version_id is None]
    stale = [(s, sorted(set(s.arguments) - taken)) for s in following]
    stale = [(s, names) for s, names in stale if names]
    if not stale:
        return
    pipeline_func = load_pipeline(name)
    compiled = {}
    if environment is not None:
        compiled = environment.defaults_for(name, rendering.parameter_types(pipeline_func))
    for schedule, names in stale:
        passes = f"schedule {schedule.name!r} follows {name}'s latest version and passes {', '.join(names)}"
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)  # said once, below, per schedule
                current = run_form.current_names(pipeline_func, schedule.arguments)
            arguments = run_form.run_arguments(pipeline_func, current, compiled)
            unknown = sorted(set(arguments) - taken)
            if unknown:
                raise UsageError(f"{', '.join(unknown)}: not a parameter or setting of {name}")
            cron = cron_module.parse_cron(schedule.cron).expression
        except (UsageError, InvalidParameterError) as err:
            print(
                f"kfstack upload: warning: {passes}, which version {ref.version} does not take: its "
                f"runs will fail. It is left as it is: {err}. Pin it to the version it ran "
                f"(kfstack schedule {name} --name {schedule.name} --version VERSION), or create it "
                "again with kfstack schedule.",
                file=sys.stderr,
            )
            continue
        recurring_runs.create_schedule(
            client,
            schedule.name,
            ref,
            False,
            schedule.experiment_id or "",
            cron,
            arguments,
            schedule.service_account,
        )
        print(
            f"kfstack upload: deprecated: {passes}, which version {ref.version} takes in "
            f"{SETTINGS_OVERRIDES} or under its current name: created it again so (kfstack does this "
            "until 0.2; create schedules with kfstack schedule, which sends settings so).",
            file=sys.stderr,
        )
