"""``kfstack render``: writes the Kubernetes objects a kubernetes run of a pipeline would create,
one YAML file each, for review or GitOps (:mod:`kfstack.pipelines.rendering`)."""

from __future__ import annotations

import argparse
import sys

from kfstack.app.cli.exit_codes import EXIT_OK
from kfstack.app.cli.options import PIPELINE_NAME_HELP, Subparsers, writable_dir
from kfstack.app.cli.parameters import parse_params
from kfstack.pipelines import chosen, rendering


def add_parser(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "render", help="write the Kubernetes objects a kubernetes run would create (review, GitOps)"
    )
    parser.add_argument("name", nargs="?", help=PIPELINE_NAME_HELP)
    parser.add_argument(
        "--out",
        required=True,
        help="directory for one YAML file per object: new, empty, or an earlier render's (replaced whole)",
    )
    parser.add_argument(
        "--param", action="append", default=[], metavar="NAME=VALUE", help="pipeline parameter (repeatable)"
    )
    parser.add_argument("--run-id", default="render", help="stands in for the KFP run id in names and labels")
    parser.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    args.name = chosen(args.name)
    # The objects are for a cluster: a path of this machine in them is refused, naming its
    # parameter, and so is a ServingRuntime the project ships that serves another predictor.
    warnings: list[str] = []
    rendered = rendering.render(
        args.name,
        parse_params(args.param, args.name),
        run_id=args.run_id,
        for_a_cluster=True,
        warnings=warnings,
    )
    for warning in warnings:
        print(f"kfstack render: warning: {warning}", file=sys.stderr)
    for path in rendering.write_objects(rendered, writable_dir(args.out)):
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
