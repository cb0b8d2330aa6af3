"""Environment files: the settings a platform team sets once per environment, compiled into a
pipeline version (``kfstack compile --env prod``, ``upload --env``).

A version's run form in the Kubeflow UI is then what a person changes per run, and
``settings_overrides`` for a setting changed for one run (:mod:`kfstack.pipelines.run_form`);
the environment's node pools, Secrets, service accounts, timeouts and thresholds are the
version's. (A pipeline whose signature is written by hand has no run form: the environment's
values become its parameters' defaults.) An environment file lives beside the kustomize overlay
of the same environment (``manifests/overlays/<env>/pipeline-parameters.yaml``) or anywhere a
path names::

    # What every pipeline that takes one of these parameters gets.
    parameters:
      gpu_pool: h100
      object_store_secret: kfstack-object-store
    # One pipeline's own (wins over the shared ones).
    pipelines:
      churn-retraining:
        window_days: 7
    # The Kubernetes service account the environment's runs and schedules run as
    # (``kfstack run/schedule --env``); without it, KFP's default.
    service_account: kfstack-runner

A shared name no installed pipeline takes, or a section for a pipeline that is not installed, is
refused (a misspelt name would otherwise be silently ignored), and so is a value of the wrong
type or a number that is not finite; the values are then checked as a run would check them
(:func:`kfstack.pipelines.rendering.render`), before anything is written or uploaded. A run
still changes any overridable setting on the command line or through the run form's
``settings_overrides``.

``service_account`` is not a pipeline parameter: KFP takes the account a run's pods run as with
the run (or the recurring run), not from the compiled spec, so ``kfstack run`` and ``kfstack
schedule`` read it (``--env``) and send it with what they create. A name that is not a
Kubernetes service account name is refused when the file is read.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import yaml

from kfstack import pipeline_spec
from kfstack.errors import InvalidParameterError, UsageError
from kfstack.kubernetes.naming import DNS_SUBDOMAIN, SIDECAR_INJECT_LABEL
from kfstack.pipelines import load_pipeline, pipeline_names
from kfstack.pipelines.parameters import CATALOG
from kfstack.pipelines.rendering import parameter_types, render
from kfstack.version import check_version

# Where ``--env NAME`` looks, under the directory kfstack runs in: beside the overlay of NAME.
OVERLAYS_DIR = os.path.join("manifests", "overlays")
FILE_NAME = "pipeline-parameters.yaml"
# The run id the objects of an environment's check are rendered under.
CHECK_RUN_ID = "environment-check"
# The top-level keys of an environment file.
_KEYS = ("parameters", "pipelines", "service_account")
# KFP's parameter types and the YAML values each takes.
_ACCEPTED: dict[str, tuple[type, ...]] = {
    "Boolean": (bool,),
    "Integer": (int,),
    "Float": (int, float),
    "String": (str,),
}


@dataclasses.dataclass(frozen=True)
class Environment:
    """One environment's parameter defaults.

    Attributes:
        name: The environment's name (the overlay's, or the file's stem).
        path: The file it was read from.
        shared: Parameter -> default for every pipeline that takes it.
        per_pipeline: Pipeline -> its own parameter defaults.
        service_account: The Kubernetes service account the environment's runs and schedules run
            as; None: KFP's default (``pipeline-runner`` on a standalone KFP, the profile's
            ``default-editor`` on a multi-user one).
    """

    name: str
    path: str
    shared: Mapping[str, Any]
    per_pipeline: Mapping[str, Mapping[str, Any]]
    service_account: str | None = None

    def check_names(self, parameters: Iterable[str], pipelines: Iterable[str]) -> None:
        """Refuses a shared parameter that none of ``parameters`` (every parameter of the
        installed pipelines and of kfstack's catalog) is, and a section for a pipeline that is
        not one of ``pipelines``: a misspelt name would otherwise be silently ignored.

        Raises:
            UsageError: Naming each unknown parameter or pipeline.
        """
        unknown = sorted(set(self.shared) - set(parameters))
        if unknown:
            raise UsageError(f"{self.path}: no pipeline takes the parameter {', '.join(unknown)}")
        strangers = sorted(set(self.per_pipeline) - set(pipelines))
        if strangers:
            raise UsageError(f"{self.path}: pipelines: no pipeline named {', '.join(strangers)} is installed")

    def defaults_for(self, pipeline: str, types: Mapping[str, str]) -> dict[str, Any]:
        """The defaults this environment gives ``pipeline``, whose parameters have the KFP
        ``types`` (name -> ``Integer``, ``Float``, ``Boolean``, ``String``).

        Raises:
            UsageError: A pipeline section names a parameter the pipeline does not take, or a
                value is not of its parameter's type.
        """
        own = self.per_pipeline.get(pipeline, {})
        unknown = sorted(set(own) - set(types))
        if unknown:
            raise UsageError(f"{self.path}: pipelines.{pipeline}: no parameter {', '.join(unknown)}")
        values = {name: value for name, value in self.shared.items() if name in types}
        values.update(own)
        for name, value in values.items():
            accepted = _ACCEPTED.get(types[name])
            if accepted is None:
                raise UsageError(
                    f"{self.path}: {name} is a {types[name]} input, which an environment cannot set"
                )
            if (isinstance(value, bool) and bool not in accepted) or not isinstance(value, accepted):
                raise UsageError(
                    f"{self.path}: {name}={value!r}: expected {types[name]} (quote a text that "
                    f"YAML would read as a number or a boolean)"
                )
        return values


def environment_path(reference: str, root: str = ".") -> str:
    """The file ``reference`` means: a path to an existing file, or the name of an overlay
    under ``root`` (``prod``: ``manifests/overlays/prod/pipeline-parameters.yaml``).

    Raises:
        UsageError: Neither exists (the message says where it looked).
    """
    if os.path.isfile(reference):
        return reference
    beside_overlay = os.path.join(root, OVERLAYS_DIR, reference, FILE_NAME)
    if os.path.isfile(beside_overlay):
        return beside_overlay
    raise UsageError(f"no environment {reference!r}: neither a file nor {beside_overlay}")


def load_environment(reference: str, root: str = ".") -> Environment:
    """The environment file ``reference`` names (see :func:`environment_path`).

    Raises:
        UsageError: It is missing, is not YAML, or is not shaped as the module docstring shows.
    """
    path = environment_path(reference, root)
    try:
        with open(path, encoding="utf-8") as f:
            document = yaml.safe_load(f) or {}
    except yaml.YAMLError as err:
        raise UsageError(f"{path}: not YAML: {err}") from None
    if not isinstance(document, dict):
        raise UsageError(f"{path}: expected a mapping with 'parameters' and/or 'pipelines'")
    extra = sorted(set(map(str, document)) - set(_KEYS))
    if extra:
        raise UsageError(f"{path}: unknown key {', '.join(extra)} (it takes {', '.join(map(repr, _KEYS))})")
    shared = _scalars(path, "parameters", document.get("parameters") or {})
    sections = document.get("pipelines") or {}
    if not isinstance(sections, dict):
        raise UsageError(f"{path}: 'pipelines' must map pipeline names to their parameters")
    per_pipeline = {
        str(name): _scalars(path, f"pipelines.{name}", values or {}) for name, values in sections.items()
    }
    account = document.get("service_account")
    if account is not None:
        account = check_service_account(account, f"{path}: service_account")
    return Environment(
        name=_name(path), path=path, shared=shared, per_pipeline=per_pipeline, service_account=account
    )


def check_service_account(name: Any, where: str) -> str:
    """``name``, when it can be a Kubernetes service account's: a DNS-1123 subdomain (kubernetes
    apimachinery pkg/api/validation/generic.go, ``ValidateServiceAccountName =
    NameIsDNSSubdomain``). KFP's API server passes a run's account on unchecked (kubeflow/pipelines
    2.17.0 backend/src/apiserver/template/template.go, setDefaultServiceAccount): a bad one would
    be found only when the run's pods are created.

    Raises:
        UsageError: Naming ``where`` (the flag or the file's key) and what a name may be.
    """
    if not isinstance(name, str) or not DNS_SUBDOMAIN.match(name):
        raise UsageError(
            f"{where} {name!r}: not a Kubernetes service account name (parts of lowercase letters, "
            f"digits and '-' joined by '.', each part starting and ending with a letter or digit, at "
            f"most 253 characters)"
        )
    return name


def _name(path: str) -> str:
    """An environment's name: its overlay's (the folder of a file named :data:`FILE_NAME`), else
    the file's stem (``envs/staging.yaml``: ``staging``)."""
    folder, file_name = os.path.split(os.path.abspath(path))
    return os.path.basename(folder) if file_name == FILE_NAME else os.path.splitext(file_name)[0]


def versioned(version: str, environment: Environment | None) -> str:
    """The name of a pipeline version compiled for ``environment``: ``<version>.<env>``, so the
    versions of two environments never share a name (and the UI says whose defaults it has).

    Raises:
        UsageError: The name cannot be a version (:func:`kfstack.version.check_version`).
    """
    if environment is None:
        return version
    try:
        return check_version(f"{version}.{environment.name}")
    except ValueError as err:
        raise UsageError(f"environment {environment.name!r}: {err}") from None


def _scalars(path: str, where: str, values: Any) -> dict[str, Any]:
    if not isinstance(values, dict):
        raise UsageError(f"{path}: '{where}' must map parameter names to values")
    for name, value in values.items():
        if not isinstance(value, (bool, int, float, str)):
            raise UsageError(f"{path}: {where}.{name} must be a number, a boolean or a text, not {value!r}")
        if isinstance(value, float) and not math.isfinite(value):
            raise UsageError(f"{path}: {where}.{name}={value!r}: expected a finite number")
    return {str(name): value for name, value in values.items()}


def with_defaults(spec: dict[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """The compiled pipeline ``spec`` with other defaults for some of its parameters, written as
    KFP's compiler writes them (numbers as floats: a protobuf ``Value``)."""
    parameters = spec["root"]["inputDefinitions"]["parameters"]
    for name, value in defaults.items():
        kind = parameters[name]["parameterType"]
        written = float(value) if kind in ("NUMBER_INTEGER", "NUMBER_DOUBLE") else value
        parameters[name]["defaultValue"] = written
        parameters[name]["isOptional"] = True
    return spec


def leave_the_mesh_out(documents: list[dict[str, Any]], defaults: Mapping[str, Any]) -> list[str]:
    """A version compiled for an environment outside any Istio mesh (its ``istio_mesh`` is
    false) has no task that asks to join one: the deployment task's pod label
    (:func:`kfstack.pipelines.wiring.joins_mesh`) is removed; returns the executors it was
    removed from.

    Why: on a cluster where Istio is installed, its injector also injects a pod labelled
    ``sidecar.istio.io/inject: "true"`` in a namespace with no injection label (the object
    selector of istio's sidecar-injector MutatingWebhookConfiguration,
    manifests/charts/istio-control/istio-discovery/templates/mutatingwebhook.yaml), and with
    classic sidecars such a pod never completes. A KFP pod label is a literal of the compiled
    spec, so the environment, which knows whether its namespace is in a mesh, decides here.
    """
    if defaults.get("istio_mesh") is not False:
        return []
    return pipeline_spec.drop_pod_label(documents, SIDECAR_INJECT_LABEL, "true")


def pipeline_defaults(environment: Environment, pipelines: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Pipeline -> the defaults ``environment`` gives it, each pipeline's checked as a run of it
    on Kubernetes would check them: every object it would create is rendered with them.

    Raises:
        UsageError: A parameter no pipeline (nor kfstack's catalog) takes, or a value of the
            wrong type.
        InvalidParameterError: A value a run would refuse (an unknown node pool, a malformed
            Spark memory...); the message names the file and the pipeline.
    """
    types = {name: parameter_types(load_pipeline(name)) for name in pipelines}
    # The names an environment may use: every installed pipeline's (an environment is shared by
    # them all, and one compile may take a few), and the catalog's.
    others = {}
    for name in sorted(set(pipeline_names()) - set(pipelines)):
        try:
            others[name] = parameter_types(load_pipeline(name))
        except UsageError:
            continue  # a pipeline that does not load is not this compile's to judge
    taken = {parameter for found in (*types.values(), *others.values()) for parameter in found}
    environment.check_names(taken | set(CATALOG.names), [*types, *others])
    found = {}
    for name in pipelines:
        defaults = environment.defaults_for(name, types[name])
        try:
            # A version is for a cluster: a path of this machine or a mismatched runtime is refused.
            render(name, defaults, run_id=CHECK_RUN_ID, for_a_cluster=True)
        except (UsageError, InvalidParameterError) as err:
            raise type(err)(f"{environment.path}: {name}: {err}") from None
        found[name] = defaults
    return found
