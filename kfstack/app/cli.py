"""The ``kfstack`` command line: compile pipelines, run them embedded, render their cluster objects.

``compile`` imports only kfp and the pipeline modules (STYLE 9): no pyspark, torch or
tensorflow, so it runs in a CI job or a laptop without them.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Any

from kfstack.pipelines import DEFAULT_PIPELINE
from kfstack.version import __version__

DEFAULT_DIST = os.path.join("dist", "pipelines")
DEFAULT_PIPELINE_ROOT = "runs"


def compiled_path(out_dir: str, name: str) -> str:
    """Where ``kfstack compile`` writes pipeline ``name``: ``<out>/<name>-<version>.yaml``."""
    return os.path.join(out_dir, f"{name}-{__version__}.yaml")


def compile_pipelines(names: list[str], out_dir: str) -> list[str]:
    """Compiles the named pipelines (all when empty) to YAML; returns the written paths."""
    from kfp import compiler

    from kfstack.pipelines import PIPELINES, load_pipeline

    os.makedirs(out_dir, exist_ok=True)
    written = []
    for name in names or sorted(PIPELINES):
        path = compiled_path(out_dir, name)
        compiler.Compiler().compile(load_pipeline(name), package_path=path)
        written.append(path)
    return written


def parse_params(pairs: list[str], pipeline_func: Any) -> dict[str, Any]:
    """Turns ``k=v`` strings into typed pipeline arguments, using the pipeline's input types.

    Raises:
        SystemExit: On an unknown name, a malformed pair or a value of the wrong type --
            before anything runs.
    """
    params = {name: spec.type for name, spec in pipeline_func.component_spec.inputs.items()}
    arguments: dict[str, Any] = {}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        if not sep:
            raise SystemExit(f"--param {pair!r}: expected NAME=VALUE")
        if name not in params:
            raise SystemExit(
                f"--param {name}: unknown parameter; known: {', '.join(params)}"
            )
        try:
            arguments[name] = _convert(raw, params[name])
        except ValueError as err:
            raise SystemExit(f"--param {name}={raw!r}: {err}") from err
    return arguments


def _convert(raw: str, kfp_type: str) -> Any:
    if kfp_type == "Boolean":
        lowered = raw.lower()
        if lowered in ("true", "1", "yes"):
            return True
        if lowered in ("false", "0", "no"):
            return False
        raise ValueError("expected true or false")
    if kfp_type == "Integer":
        return int(raw)
    if kfp_type == "Float":
        return float(raw)
    return raw


def _cmd_compile(args: argparse.Namespace) -> int:
    for path in compile_pipelines(args.names, args.out):
        print(path)
    return 0


def _cmd_list(args: argparse.Namespace) -> int:
    from kfstack.pipelines import PIPELINES

    for name in sorted(PIPELINES):
        print(name)
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    from kfstack.pipelines import load_pipeline

    if not args.local:
        print(
            "kfstack run: only --local (the embedded platform) is available; running on a "
            "Kubeflow cluster comes with the Kubernetes launchers. Nothing was submitted.",
            file=sys.stderr,
        )
        return 2
    try:
        pipeline_func = load_pipeline(args.name)
    except KeyError as err:
        print(f"kfstack run: {err.args[0]}", file=sys.stderr)
        return 2
    arguments = parse_params(args.param, pipeline_func)
    if arguments.get("platform", "local") != "local":
        print("kfstack run --local: the platform parameter is set to 'local' by --local; "
              f"drop --param platform={arguments['platform']}", file=sys.stderr)
        return 2
    if "platform" in pipeline_func.component_spec.inputs:
        arguments["platform"] = "local"

    from kfstack.app.local_run import run_pipeline_locally

    summary = run_pipeline_locally(args.name, arguments, pipeline_root=args.pipeline_root)
    print("\n" + summary.render())
    if args.summary_json:
        summary.write_json(args.summary_json)
        print(f"summary written to {args.summary_json}")
    return 0 if summary.status == "SUCCEEDED" else 1


def _cmd_render(args: argparse.Namespace) -> int:
    from kfstack.errors import InvalidParameterError
    from kfstack.kubernetes.render import render_objects, write_objects
    from kfstack.pipelines import load_pipeline

    try:
        pipeline_func = load_pipeline(args.name)
    except KeyError as err:
        print(f"kfstack render: {err.args[0]}", file=sys.stderr)
        return 2
    arguments = parse_params(args.param, pipeline_func)
    try:
        objects = render_objects(args.name, arguments, run_id=args.run_id, pipeline_root=args.pipeline_root)
    except InvalidParameterError as err:
        print(f"kfstack render: {err}", file=sys.stderr)
        return 2
    for path in write_objects(objects, args.out):
        print(path)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kfstack", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"kfstack {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p_compile = sub.add_parser("compile", help="compile pipelines to YAML (dist/pipelines)")
    p_compile.add_argument("names", nargs="*", help="pipelines to compile (default: all)")
    p_compile.add_argument("--out", default=DEFAULT_DIST, help="output directory")
    p_compile.set_defaults(func=_cmd_compile)

    p_list = sub.add_parser("list", help="list the pipelines")
    p_list.set_defaults(func=_cmd_list)

    p_run = sub.add_parser("run", help="run a pipeline")
    p_run.add_argument("name", nargs="?", default=DEFAULT_PIPELINE, help="pipeline name")
    p_run.add_argument("--local", action="store_true",
                       help="run on the embedded platform (kfp.local, no cluster)")
    p_run.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                       help="pipeline parameter (repeatable)")
    p_run.add_argument("--pipeline-root", default=DEFAULT_PIPELINE_ROOT,
                       help="directory for the run's artifacts")
    p_run.add_argument("--summary-json", help="also write the run summary as JSON here")
    p_run.set_defaults(func=_cmd_run)

    p_render = sub.add_parser(
        "render", help="write the Kubernetes objects a kubernetes run would create (review, GitOps)")
    p_render.add_argument("name", nargs="?", default=DEFAULT_PIPELINE, help="pipeline name")
    p_render.add_argument("--out", required=True, help="directory for one YAML file per object")
    p_render.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                          help="pipeline parameter (repeatable)")
    p_render.add_argument("--pipeline-root", default="s3://kfstack/pipeline-root",
                          help="the object-store root the run's artifacts would live under")
    p_render.add_argument("--run-id", default="render",
                          help="stands in for the KFP run id in names and labels")
    p_render.set_defaults(func=_cmd_render)
    return parser


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
