"""``kfstack describe``: a pipeline's name, description and parameters (type, default,
description), read from its compiled interface -- with an environment's defaults when ``--env``
names one. A pipeline declared with a :class:`~kfstack.pipelines.parameters.ParameterSet` shows
what a person sets per run first (its run form), then the settings compiled into a version, by
group (:mod:`kfstack.pipelines.run_form`)."""

from __future__ import annotations

import argparse
import textwrap
from typing import Any

from kfstack import pipeline_spec
from kfstack.app.cli.exit_codes import EXIT_OK
from kfstack.app.cli.options import PIPELINE_NAME_HELP, Subparsers
from kfstack.app.cli.parameters import embedded_budget
from kfstack.pipelines import chosen, environments, load_pipeline, rendering, run_form
from kfstack.pipelines.parameters import PER_RUN, declared_parameters
from kfstack.settings import SETTINGS_OVERRIDES

DESCRIBE_WIDTH = 96
DESCRIBE_ENV_HELP = (
    "an environment file, or the name of an overlay that has one: the defaults shown are those "
    "`kfstack compile --env` would compile"
)


def add_parser(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser("describe", help="a pipeline's parameters: type, default, description")
    parser.add_argument("name", nargs="?", help=PIPELINE_NAME_HELP)
    parser.add_argument("--env", metavar="ENV", help=DESCRIBE_ENV_HELP)
    parser.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    args.name = chosen(args.name)
    pipeline_func = load_pipeline(args.name)
    spec = rendering.compiled_spec(pipeline_func)
    environment = environments.load_environment(args.env) if args.env else None
    if environment:
        environments.with_defaults(spec, environments.pipeline_defaults(environment, [args.name])[args.name])
    info = spec.get("pipelineInfo", {})
    print(info.get("name", args.name))
    if info.get("description"):
        print(textwrap.fill(info["description"], width=DESCRIBE_WIDTH))
    documented = {parameter.name: parameter for parameter in pipeline_spec.pipeline_parameters(spec)}
    declared = declared_parameters(pipeline_func)
    if declared is None:  # a signature written by hand: no groups to show
        sections = {"parameters": list(documented)}
    else:
        sections = {
            heading(group, environment): [p.name for p in parameters]
            for group, parameters in declared.grouped().items()
        }
    if declared is None:
        print("\nset any of them with --param NAME=VALUE (kfstack run) or in the Kubeflow UI's run form")
    else:
        print(
            "\nthe per-run parameters are the run form's fields (kfstack run: --param NAME=VALUE); the "
            "settings are compiled into the version, and a run changes one with --param NAME=VALUE or "
            f'the run form\'s {SETTINGS_OVERRIDES} {{"NAME": VALUE}}, except those marked not overridable'
        )
    fixed = run_form.fixed_settings(pipeline_func) if declared is not None else set()
    # An embedded run takes a smaller tuning budget than the defaults, which are a cluster run's:
    # shown beside them, so that a person sees what each run will use.
    embedded = embedded_budget(pipeline_func)
    for title, names in sections.items():
        print(f"\n{title}:")
        for name in names:
            show(
                documented[name],
                "compiled in, not overridable per run" if name in fixed else "",
                embedded.get(name),
            )
    return EXIT_OK


def heading(group: str, environment: environments.Environment | None) -> str:
    if group == PER_RUN:
        return "per run (what a person sets when triggering a run)"
    if environment:
        return f"{group} (settings: {environment.name}'s values)"
    return f"{group} (settings: the defaults, which an environment file can set)"


def show(parameter: pipeline_spec.ParameterDoc, note: str = "", embedded: Any = None) -> None:
    """One parameter: its line, then where ``embedded`` is given (what an embedded run takes
    where a person sets none) a line saying so, then its description."""
    default = "required" if parameter.required else f"default {parameter.default!r}"
    print(f"  {parameter.name}  ({parameter.type}, {default}{'; ' + note if note else ''})")
    if embedded is not None:
        print(
            f"      a cluster run: {parameter.default!r}; an embedded run (kfstack run --local): "
            f"{embedded!r}, unless set"
        )
    if parameter.description:
        print(
            textwrap.fill(
                parameter.description,
                width=DESCRIBE_WIDTH,
                initial_indent=" " * 6,
                subsequent_indent=" " * 6,
            )
        )
