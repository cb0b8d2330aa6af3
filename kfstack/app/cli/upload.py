"""``kfstack upload``: compiles pipelines and uploads them to a KFP API server as the version
named by ``--pipeline-version``."""

from __future__ import annotations

import argparse
import sys
import tempfile

from kfstack.app.cli.compile_ import compile_pipelines, stamped_version
from kfstack.app.cli.exit_codes import EXIT_OK
from kfstack.app.cli.options import Subparsers, add_compiled_version_options, kfp_server_options
from kfstack.pipelines import environments, pipeline_names
from kfstack.version import DIRTY_SUFFIX


def add_parser(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "upload",
        help="compile pipelines and upload them to a KFP server as a version named by --pipeline-version",
        parents=[kfp_server_options()],
        epilog="A new pipeline is created with this version as its first version; a version already "
        "there is not uploaded again (exit 0).",
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
        with connection.connect(args.host, args.namespace, args.token) as client:
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
    return EXIT_OK
