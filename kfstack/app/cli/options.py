"""What several ``kfstack`` commands share on the command line: help texts, defaults, the KFP
API server's flags, and the checks of the values they are given."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any, TypeAlias

from kfstack.errors import UsageError
from kfstack.pipelines import environments
from kfstack.version import VERSION_ENV

if TYPE_CHECKING:
    from kfstack.app.kfp_server.pipelines import PipelineVersionRef

DEFAULT_PIPELINE_ROOT = "runs"
TASK_IMAGE_HELP = (
    "the image kfstack's own tasks run in on the cluster: kfstack's launcher image with your "
    "package installed (default: the pipeline's registration's task_image, else kfstack's launcher)"
)
ENV_HELP = (
    "an environment file, or the name of an overlay that has one (manifests/overlays/ENV/"
    f"{environments.FILE_NAME}): its settings are compiled into the version, whose run form is the "
    "per-run parameters and settings_overrides; the file and the "
    "uploaded version are named <version>.<env> (the tasks and the model's lineage keep <version>)"
)
# The attribute a command's parser sets (to []) when it takes the flags it does not know, to hand
# them to the program it starts; main() puts those flags there.
PASSED_ON = "passed_on"
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
    connection.add_argument(
        "--token-file",
        metavar="FILE",
        help=f"file holding a bearer token the API server (or its proxy) accepts; also: ${KFP_TOKEN_ENV} "
        "holding the token itself",
    )
    connection.add_argument(
        "--token",
        help="the token itself: it lands in the process list and the shell's history, so this warns; "
        "prefer --token-file or $" + KFP_TOKEN_ENV,
    )
    return server


# The KFP API token where a process list and a shell's history do not show it.
KFP_TOKEN_ENV = "KFSTACK_KFP_TOKEN"
# The flags of :func:`kfp_server_options` (flag -> attribute, for :func:`flags_given`).
KFP_SERVER_FLAGS = {
    "--host": "host",
    "--namespace": "namespace",
    "--token": "token",
    "--token-file": "token_file",
}


def kfp_token(args: argparse.Namespace) -> str | None:
    """The KFP API token the flags of :func:`kfp_server_options` give: ``--token`` (with a
    warning on stderr), else ``--token-file``'s, else ``$KFSTACK_KFP_TOKEN``, else None
    (``kfp.Client`` finds its own).

    Raises:
        UsageError: Both flags given; a token file that cannot be read or is empty.
    """
    from kfstack.app.alert_receiver.tokens import read_token

    if args.token and args.token_file:
        raise UsageError("--token and --token-file: give one")
    if args.token:
        print(
            f"warning: --token shows the token in the process list and the shell's history; use "
            f"--token-file FILE or ${KFP_TOKEN_ENV}",
            file=sys.stderr,
        )
        return str(args.token)
    if args.token_file:
        return read_token(args.token_file, "--token-file")
    return os.environ.get(KFP_TOKEN_ENV, "").strip() or None


def add_compiled_version_options(parser: argparse.ArgumentParser, version_help: str) -> None:
    """``--pipeline-version``, ``--task-image`` and ``--env``: what ``compile`` and ``upload``
    compile each pipeline with (:func:`~kfstack.app.cli.compile_.compile_pipelines`).

    Args:
        version_help: What the version is to the command; the help goes on with its default.
    """
    parser.add_argument(
        "--pipeline-version",
        default=None,
        help=f"{version_help} (default: <package version>+<git short sha>[-dirty] of this source "
        f"tree, or ${VERSION_ENV})",
    )
    parser.add_argument("--task-image", metavar="IMAGE", help=TASK_IMAGE_HELP)
    parser.add_argument("--env", metavar="ENV", help=ENV_HELP)


# The flags of :func:`add_run_target_options` (flag -> attribute, for :func:`flags_given`).
RUN_TARGET_FLAGS = {
    "--version": "version_name",
    "--experiment": "experiment",
    "--service-account": "service_account",
    "--env": "env",
}
SERVICE_ACCOUNT_HELP = (
    "the Kubernetes service account the run's pods run as: the runs' own account, bound to the "
    "launcher Role, for least privilege and a stable identity in the mesh policy and the audit "
    "labels. Default: the --env environment's service_account, else KFP's own (pipeline-runner; "
    "on a multi-user KFP the profile's default-editor)"
)
RUN_ENV_HELP = (
    "an environment file, or the name of an overlay that has one (as upload --env): its "
    "service_account is the default of --service-account, and its settings are those the run is "
    "checked with: the uploaded version's (upload --env compiles them in; pick it with --version)"
)


def add_run_target_options(
    parser: argparse.ArgumentParser, version_help: str, experiment_help: str, help_prefix: str = ""
) -> None:
    """``--version`` (``args.version_name``), ``--experiment``, ``--service-account`` and
    ``--env``: the uploaded version the runs of ``run`` (on a cluster) and ``schedule`` start
    from, the experiment they go to, and the service account they run as
    (:func:`run_service_account`). ``help_prefix`` starts the help of each (``run``:
    ``"cluster: "``, as its other cluster-only flags, since ``--local`` ignores them)."""
    parser.add_argument("--version", dest="version_name", metavar="VERSION", help=help_prefix + version_help)
    parser.add_argument("--experiment", help=help_prefix + experiment_help)
    parser.add_argument("--service-account", metavar="NAME", help=help_prefix + SERVICE_ACCOUNT_HELP)
    parser.add_argument("--env", metavar="ENV", help=help_prefix + RUN_ENV_HELP)


def run_service_account(args: argparse.Namespace) -> str | None:
    """The service account the options of :func:`add_run_target_options` name: ``--service-account``,
    else the ``service_account`` of the ``--env`` environment, else None (KFP's default). Checked
    here, before a connection is made.

    Raises:
        UsageError: Not a Kubernetes service account name (naming the flag or the file); an
            environment that is missing or malformed.
    """
    from_env = environments.load_environment(args.env).service_account if args.env else None
    if args.service_account is not None:
        return environments.check_service_account(args.service_account, "--service-account")
    return from_env


def resolve_run_target(
    client: Any, pipeline: str, args: argparse.Namespace
) -> tuple[PipelineVersionRef, str, str]:
    """What the options of :func:`add_run_target_options` name on the server: the version of
    ``pipeline`` (default: its latest), the experiment (default: the pipeline's name) and its id.
    The experiment is created if absent, and that said on stdout.

    Raises:
        UsageError: The pipeline or the version is not on the server.
    """
    from kfstack.app.kfp_server import pipelines, runs

    experiment = args.experiment or pipeline
    ref = pipelines.resolve_version(client, pipeline, args.version_name)
    experiment_id, created = runs.ensure_experiment(client, experiment)
    if created:
        print(f"created experiment {experiment} ({experiment_id})")
    return ref, experiment, experiment_id


def add_param_option(parser: argparse.ArgumentParser, help_text: str) -> None:
    """``--param NAME=VALUE``, repeatable (``args.param``: a list, read by
    :func:`~kfstack.app.cli.parameters.parse_params`)."""
    parser.add_argument("--param", action="append", default=[], metavar="NAME=VALUE", help=help_text)


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
