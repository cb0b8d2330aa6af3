"""``kfstack describe``: a pipeline's name, description and parameters (type, default,
description), read from its compiled interface."""

from __future__ import annotations

import argparse
import textwrap

from kfstack import pipeline_spec
from kfstack.app.cli.exit_codes import EXIT_OK
from kfstack.app.cli.options import PIPELINE_NAME_HELP, Subparsers
from kfstack.pipelines import chosen, load_pipeline, rendering

DESCRIBE_WIDTH = 96


def add_parser(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser("describe", help="a pipeline's parameters: type, default, description")
    parser.add_argument("name", nargs="?", help=PIPELINE_NAME_HELP)
    parser.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
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
