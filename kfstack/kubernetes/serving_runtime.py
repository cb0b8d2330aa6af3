"""Does a team's ServingRuntime serve what its pipeline declares?

A pipeline with a team's own ``kserve.Model`` names three things its deployment relies on: the
class (``custom_predictor``, ``package.module:Class``), the ServingRuntime KServe runs it in
(``serving_runtime``) and the model format that runtime declares (``serving_model_format``). The
runtime itself is a file the team ships (``manifests/serving-runtime.yaml`` of a ``kfstack init``
project) or an object already in the cluster, written apart from the pipeline: a class renamed
in one and not in the other is caught nowhere until KServe's pod fails to import it, after the
training. :func:`problems` compares the two, for ``kfstack render`` (the shipped file,
:func:`shipped_runtimes`) and for the run's first task and the deployment step (the cluster's
object, :func:`cluster_runtime`).

What a runtime's container runs is read from its command and arguments:

- ``kfstack serve ... --format custom --predictor package.module:Class`` (kfstack's public CLI):
  the class it names;
- ``python -m kfstack.serving.format_server ... --custom_predictor=package.module:Class``: the
  class it names, with a warning, as the module is internal (what earlier ``kfstack init``
  projects wrote);
- ``python -m some.module`` (a team's own server): its top-level
  package must be the class's;
- anything else (a console script of the image's own): not read.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import yaml

from kfstack.errors import InvalidParameterError
from kfstack.images import DEFAULT_REGISTRY, image_for
from kfstack.kubernetes.launcher import Cluster
from kfstack.kubernetes.sdk import lazy_module

if TYPE_CHECKING:
    from kubernetes import client
    from kubernetes.client import rest
else:
    client = lazy_module("kubernetes.client")
    rest = lazy_module("kubernetes.client.rest")

logger = logging.getLogger(__name__)

GROUP, VERSION = "serving.kserve.io", "v1alpha1"
KINDS = {"ServingRuntime": "servingruntimes", "ClusterServingRuntime": "clusterservingruntimes"}
# The module earlier projects' runtimes ran: internal, so its flags may change in any release.
INTERNAL_SERVER = "kfstack.serving.format_server"
# The image a generated runtime names until the team sets its own (kfstack init's template).
PLACEHOLDER_REGISTRY = "ghcr.io/your-team/"
# The protocol kfstack's canary analysis and evaluation speak to a team's own model server.
PROTOCOL = "v1"


@dataclasses.dataclass(frozen=True)
class Declared:
    """What the pipeline declares of its team's server (the deployment step's arguments).

    Attributes:
        model_class: ``package.module:Class`` (``custom_predictor``).
        runtime: The runtime's name (``serving_runtime``).
        model_format: The model format the runtime must list (``serving_model_format``).
    """

    model_class: str
    runtime: str
    model_format: str

    @property
    def package(self) -> str:
        return self.model_class.partition(":")[0].partition(".")[0]


@dataclasses.dataclass(frozen=True)
class Findings:
    """What :func:`problems` found: ``refused``, each naming the runtime's value and the
    pipeline's; ``warnings``, what works today but should change."""

    refused: list[str]
    warnings: list[str]


def problems(runtime: dict, declared: Declared, where: str) -> Findings:
    """``runtime`` (a ServingRuntime or ClusterServingRuntime) against ``declared``; ``where``
    says whose the runtime is in each message (a file, or the cluster)."""
    refused: list[str] = []
    warnings: list[str] = []
    what = f"{where} ({runtime.get('kind', 'ServingRuntime')} {runtime.get('metadata', {}).get('name', '')})"
    spec = runtime.get("spec") or {}
    formats = [f.get("name", "") for f in spec.get("supportedModelFormats") or [] if isinstance(f, dict)]
    if declared.model_format not in formats:
        refused.append(
            f"{what} supports model format {', '.join(formats) or 'none'}, but the pipeline's Predictor "
            f"declares runtime_model_format={declared.model_format!r} (serving_model_format)"
        )
    protocols = spec.get("protocolVersions")
    if protocols and PROTOCOL not in protocols:
        refused.append(
            f"{what} speaks {', '.join(protocols)}, but kfstack's evaluation and canary analysis ask a "
            f"team's predictor over {PROTOCOL}: add {PROTOCOL} to its protocolVersions"
        )
    containers = [c for c in spec.get("containers") or [] if isinstance(c, dict)]
    container = next((c for c in containers if c.get("name") == "kserve-container"), None) or (
        containers[0] if containers else {}
    )
    command = [str(part) for part in [*(container.get("command") or []), *(container.get("args") or [])]]
    module, served = _served(command)
    if module == INTERNAL_SERVER:
        warnings.append(
            f"{what} runs the internal module {INTERNAL_SERVER}, whose flags may change in any "
            f"release: run `kfstack serve --model /mnt/models --format custom --predictor "
            f"{declared.model_class} --name {{{{.Name}}}} --port 8080 --address 0.0.0.0` "
            "(kfstack init writes it so)"
        )
    if served and served != declared.model_class:
        refused.append(
            f"{what} serves predictor {served}, but the pipeline's Predictor is {declared.model_class}"
        )
    elif module and not served and module.partition(".")[0] != declared.package:
        refused.append(
            f"{what} runs python -m {module}, which is not of {declared.package}, the package of the "
            f"pipeline's Predictor {declared.model_class}"
        )
    image = str(container.get("image") or "")
    if _repository(image) in {_repository(image_for("predictor")), f"{DEFAULT_REGISTRY}/kfstack-predictor"}:
        refused.append(
            f"{what} runs image {image}, kfstack's own predictor image, which holds no {declared.package}: "
            f"build the project's predictor image (images/predictor.Dockerfile) and name it there"
        )
    elif image.startswith(PLACEHOLDER_REGISTRY):
        warnings.append(
            f"{what} names image {image}, the template's placeholder: push the project's predictor "
            f"image (images/predictor.Dockerfile) and name it there before applying the runtime"
        )
    return Findings(refused, warnings)


def _served(command: Sequence[str]) -> tuple[str, str]:
    """``(module, predictor)`` a container command runs: the module of ``python -m`` (``kfstack
    serve``: empty) and the predictor class it names (empty where it names none)."""
    parts = list(command)
    if len(parts) >= 2 and os.path.basename(parts[0]) == "kfstack" and parts[1] == "serve":
        return "", _flag(parts[2:], "--predictor")
    if "-m" in parts[:-1] and os.path.basename(parts[0]).startswith("python"):
        index = parts.index("-m")
        module = parts[index + 1]
        return module, _flag(parts[index + 2 :], "--custom_predictor") if module == INTERNAL_SERVER else ""
    return "", ""


def _flag(arguments: Sequence[str], flag: str) -> str:
    """The value of ``flag`` among ``arguments`` (``--flag=V`` or ``--flag V``); empty if absent."""
    for i, argument in enumerate(arguments):
        if argument.startswith(f"{flag}="):
            return argument.partition("=")[2]
        if argument == flag and i + 1 < len(arguments):
            return arguments[i + 1]
    return ""


def _repository(image: str) -> str:
    """An image reference without its tag or digest."""
    name = image.split("@", 1)[0]
    head, _, last = name.rpartition("/")
    return f"{head}/{last.partition(':')[0]}" if head else last.partition(":")[0]


def shipped_runtimes(project: str) -> Iterator[tuple[str, dict]]:
    """``(path relative to project, object)`` of every ServingRuntime and ClusterServingRuntime
    in the YAML files under ``<project>/manifests`` (a file that is not YAML is not one)."""
    manifests = os.path.join(project, "manifests")
    for folder, subfolders, files in os.walk(manifests):
        subfolders.sort()
        for name in sorted(files):
            if not name.endswith((".yaml", ".yml")):
                continue
            path = os.path.join(folder, name)
            try:
                with open(path, encoding="utf-8") as f:
                    documents = list(yaml.safe_load_all(f))
            except (OSError, yaml.YAMLError):
                continue
            for document in documents:
                if isinstance(document, dict) and document.get("kind") in KINDS:
                    yield os.path.relpath(path, project), document


def check_shipped(project: str, declared: Declared) -> list[str]:
    """The runtime ``project`` ships under ``declared.runtime``'s name, against ``declared``;
    returns the warnings.

    Raises:
        InvalidParameterError: Each mismatch, naming the file's value and the pipeline's; or the
            project ships runtimes and none of that name.
    """
    shipped = list(shipped_runtimes(project))
    named = [(path, obj) for path, obj in shipped if obj.get("metadata", {}).get("name") == declared.runtime]
    if shipped and not named:
        listed = ", ".join(f"{obj.get('metadata', {}).get('name', '')} ({path})" for path, obj in shipped)
        raise InvalidParameterError(
            f"the pipeline's Predictor names runtime {declared.runtime!r} (serving_runtime), but the "
            f"project ships {listed}: name the same runtime in both"
        )
    refused, warnings = [], []
    for path, obj in named:
        found = problems(obj, declared, path)
        refused += found.refused
        warnings += found.warnings
    if refused:
        raise InvalidParameterError("; ".join(refused))
    return warnings


def cluster_runtime(cluster: Cluster, name: str) -> tuple[dict | None, str]:
    """The runtime KServe would run ``name`` with in the cluster's namespace: its ServingRuntime
    there, else the ClusterServingRuntime of that name (KServe looks in that order); ``None``
    when neither is there, with why it could not be read where it could not (a permission, an
    API the cluster does not serve), else an empty reason."""
    api = client.CustomObjectsApi(cluster.api_client)
    unread = []
    for kind, plural in KINDS.items():
        try:
            if kind == "ServingRuntime":
                found = api.get_namespaced_custom_object(GROUP, VERSION, cluster.namespace, plural, name)
            else:
                found = api.get_cluster_custom_object(GROUP, VERSION, plural, name)
        except rest.ApiException as err:
            if err.status != 404:
                unread.append(f"{kind} {name}: {err.status} {err.reason}")
            continue
        return found, ""
    return None, "; ".join(unread)


def check_cluster(stage: str, cluster: Cluster, declared: Declared) -> None:
    """The cluster's runtime for ``declared`` against it (see :func:`problems`), before anything
    is deployed. A runtime this account may not read is logged and left to KServe.

    Raises:
        InvalidParameterError: The runtime serves another class, format or package, or the
            cluster has no runtime of that name in the namespace or cluster-wide; each named
            with the cluster's value and the pipeline's.
    """
    runtime, unread = cluster_runtime(cluster, declared.runtime)
    if runtime is None:
        if unread:
            logger.warning(
                "%s: the runtime %s could not be read (%s); it is not checked here",
                stage,
                declared.runtime,
                unread,
            )
            return
        raise InvalidParameterError(
            f"{stage}: serving_runtime={declared.runtime!r}: the cluster has no ServingRuntime of that name "
            f"in namespace {cluster.namespace} and no ClusterServingRuntime: apply the project's "
            f"(kubectl apply -n {cluster.namespace} -f manifests/serving-runtime.yaml)"
        )
    found = problems(runtime, declared, f"the cluster's runtime in {cluster.namespace}")
    for warning in found.warnings:
        logger.warning("%s: %s", stage, warning)
    if found.refused:
        raise InvalidParameterError(f"{stage}: " + "; ".join(found.refused))
