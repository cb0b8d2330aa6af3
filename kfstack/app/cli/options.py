"""What several ``kfstack`` commands share on the command line: help texts, defaults, the KFP
API server's flags, and the checks of the values they are given."""

from __future__ import annotations

import argparse
import os
from typing import TypeAlias

from kfstack.errors import UsageError

DEFAULT_PIPELINE_ROOT = "runs"
TASK_IMAGE_HELP = (
    "the image kfstack's own tasks run in on the cluster: kfstack's launcher image with your "
    "package installed (default: the pipeline's registration's task_image, else kfstack's launcher)"
)
PIPELINE_NAME_HELP = "pipeline name (kfstack list), or module:function; optional when one is installed"

# What ``add_subparsers`` returns, to which each command adds its own parser (argparse gives the
# class no public name).
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def kfp_server_options() -> argparse.ArgumentParser:
    """The flags naming the KFP API server of ``upload``, ``run`` (without ``--local``) and
    ``schedule``: a parent parser for their sub-parsers."""
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
    return server


def flags_given(args: argparse.Namespace, flags: dict[str, str]) -> list[str]:
    """The flags among ``flags`` (flag -> attribute) set on the command line: not at their
    default, ``None``, ``False`` or an empty list (by identity: ``--poll-seconds 0`` is set)."""
    return [
        flag
        for flag, attribute in flags.items()
        if (value := getattr(args, attribute)) is not None and value is not False and value != []
    ]


def writable_dir(path: str) -> str:
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
