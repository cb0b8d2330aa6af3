"""``kfstack compile``: pipelines to YAML files (``dist/pipelines`` unless ``--out``), each
stamped with the pipeline version, kfstack's tasks in the pipeline's task image. (The module's
name keeps clear of the builtin ``compile``.)
"""

from __future__ import annotations

import argparse
import os
import sys

from kfp import compiler

from kfstack import pipeline_spec
from kfstack.app.cli.exit_codes import EXIT_OK
from kfstack.app.cli.options import Subparsers, add_compiled_version_options, writable_dir
from kfstack.errors import UsageError
from kfstack.images import COMPONENT_IMAGE
from kfstack.pipelines import entry, environments, load_pipeline, pipeline_names, run_form
from kfstack.pipelines.validate_run import RUN_TIMES
from kfstack.version import PIPELINE_ENV, VERSION_ENV, label_safe, pipeline_version

DEFAULT_DIST = os.path.join("dist", "pipelines")


def add_parser(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser("compile", help="compile pipelines to YAML (dist/pipelines)")
    parser.add_argument("names", nargs="*", help="pipelines to compile (default: all)")
    parser.add_argument("--out", default=DEFAULT_DIST, help="output directory")
    add_compiled_version_options(parser, "the version stamped into the pipelines")
    parser.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    environment = environments.load_environment(args.env) if args.env else None
    for path in compile_pipelines(args.names, args.out, args.pipeline_version, args.task_image, environment):
        print(path)
    return EXIT_OK


def stamped_version(explicit: str | None) -> str:
    """The pipeline version (:func:`~kfstack.version.pipeline_version`) or a usage error."""
    try:
        return pipeline_version(explicit)
    except ValueError as err:
        raise UsageError(f"--pipeline-version: {err}") from None


def compiled_path(out_dir: str, name: str, version: str) -> str:
    """Where ``kfstack compile`` writes pipeline ``name``: ``<out>/<name>-<version>.yaml``
    (the version :func:`~kfstack.version.label_safe`, a file name without ``+``)."""
    return os.path.join(out_dir, f"{name}-{label_safe(version)}.yaml")


def compile_pipelines(
    names: list[str],
    out_dir: str,
    version: str | None = None,
    task_image: str | None = None,
    environment: environments.Environment | None = None,
) -> list[str]:
    """Compiles the named pipelines (all when empty) to YAML, each stamped with the pipeline
    version (:func:`~kfstack.version.pipeline_version`; ``version`` overrides it), kfstack's
    tasks in the pipeline's task image (``task_image``, else its registration's), as its run
    form (:mod:`kfstack.pipelines.run_form`) with the settings ``environment`` gives it compiled
    in: the file is then named after the environment's version
    (:func:`~kfstack.pipelines.environments.versioned`), while the tasks and the model's lineage
    carry the version itself (``kfstack reproduce`` compares it with a checkout's); returns the
    written paths.

    Raises:
        UsageError: An unknown pipeline, a malformed version or image, ``out_dir`` is not
            writable, or the environment names a parameter no pipeline takes.
        InvalidParameterError: The environment sets a value a run would refuse.
    """
    if task_image is not None and (not task_image or any(c.isspace() for c in task_image)):
        raise UsageError(
            f"--task-image {task_image!r}: an image reference (registry/name:tag) without spaces"
        )
    if task_image is not None and not names:
        raise UsageError("--task-image is one pipeline's image: name the pipelines it is for")
    pipelines = [(name, load_pipeline(name)) for name in (names or pipeline_names())]
    stamped = stamped_version(version)
    # An environment's defaults are checked for every pipeline before any file is written.
    defaults = environments.pipeline_defaults(environment, [n for n, _ in pipelines]) if environment else {}
    writable_dir(out_dir)
    written = []
    for name, pipeline_func in pipelines:
        path = compiled_path(out_dir, name, environments.versioned(stamped, environment))
        settings = defaults.get(name, {})
        compiler.Compiler().compile(run_form.version_function(pipeline_func, settings), package_path=path)
        with open(path, encoding="utf-8") as f:
            documents = pipeline_spec.read_documents(f)
        pipeline_spec.stamp_version(documents, stamped, label_safe(stamped), VERSION_ENV, PIPELINE_ENV)
        # The run's check tells a recurring run from one started once by KFP's times of the run
        # (the MLflow parent's kfstack.started_by); a KFP backend fills them in.
        pipeline_spec.give_run_times(documents[0], RUN_TIMES)
        if settings:
            # A pipeline with a run form has them compiled in; one without takes them as defaults.
            environments.with_defaults(documents[0], run_form.still_parameters(documents[0], settings))
            environments.leave_the_mesh_out(documents, settings)
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
            pipeline_spec.write_documents(documents, f)
        written.append(path)
    return written
