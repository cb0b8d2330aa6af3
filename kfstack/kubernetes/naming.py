"""Names, labels and the namespace of the objects kfstack creates.

A launched object's name derives from the pipeline run and the task
(docs/architecture.md#idempotent-cancellable-bounded-launchers): a retried launcher pod computes the
same name, finds the object its previous attempt created and adopts it instead of starting a second
job. Labels carry the run so that the pipeline's exit handler can find and delete whatever the run
left behind.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import os
import re
from collections.abc import Mapping

from kfstack.errors import InvalidParameterError
from kfstack.tracking.cluster import TaskTracking

PART_OF_LABEL = "app.kubernetes.io/part-of"
RUN_LABEL = "kfstack.dev/pipeline-run"
TASK_LABEL = "kfstack.dev/pipeline-task"
# Every pod of a batch job kfstack launches carries this fixed label: what the NetworkPolicies
# of manifests/components/network-policies select (the run labels change every run, and
# InferenceServices carry them too).
WORKLOAD_LABEL = "kfstack.dev/workload"
BATCH_WORKLOAD = "batch"
# Out of an Istio mesh, by label (Istio reads the label before the annotation, and KFP 2.17
# writes the annotation on its own pods): a sidecar-injected namespace, and ambient mode, which
# ignores the sidecar label.
SIDECAR_INJECT_LABEL = "sidecar.istio.io/inject"
DATAPLANE_MODE_LABEL = "istio.io/dataplane-mode"
# Audit labels of an object a launcher creates in a namespace other than its own pod's: where
# the run that created it runs, and as whom (the run label says which run).
SOURCE_NAMESPACE_LABEL = "kfstack.dev/source-namespace"
SOURCE_SERVICE_ACCOUNT_LABEL = "kfstack.dev/source-service-account"
NAMESPACE_ENV = "KFSTACK_NAMESPACE"
SERVICE_ACCOUNT_ENV = "KFSTACK_SERVICE_ACCOUNT"
SERVICE_ACCOUNT_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
SERVICE_ACCOUNT_TOKEN_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/token"
# A service account's user name, the `sub` claim of its token (kubernetes/kubernetes,
# staging/src/k8s.io/apiserver/pkg/authentication/serviceaccount/util.go, MakeUsername).
_SERVICE_ACCOUNT_SUBJECT = re.compile(r"^system:serviceaccount:[^:]+:(?P<name>[^:]+)$")

# Pod and Service names derive from the job name plus e.g. "-worker-12": DNS-1035 labels of at
# most 63 characters. A 12-hex digest keeps collisions between runs negligible (2^48).
_PREFIX = re.compile(r"^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$")
_LABEL_VALUE_INVALID = re.compile(r"[^A-Za-z0-9_.-]+")
# A valid label value as the API server checks it (apimachinery validation.IsValidLabelValue).
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
# Kubernetes object names as the API server checks them (kubernetes/apimachinery,
# pkg/util/validation/validation.go): a DNS-1123 label (a namespace's name) is at most 63
# lowercase letters, digits and '-', a letter or digit at each end; a DNS-1123 subdomain (most
# objects' names: a service account's, a Secret's) is such labels joined by '.' (there without
# the 63-character bound on each), at most 253 characters in all, so ``a..b`` is none.
_DNS_LABEL_PART = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS_LABEL = re.compile(rf"^(?=.{{1,63}}\Z){_DNS_LABEL_PART}\Z")
DNS_SUBDOMAIN = re.compile(rf"^(?=.{{1,253}}\Z){_DNS_LABEL_PART}(\.{_DNS_LABEL_PART})*\Z")


def resource_name(prefix: str, run_id: str, task_name: str) -> str:
    """``<prefix>-<12 hex digits of sha256(run_id/task_name)>``: stable across task retries.

    Raises:
        InvalidParameterError: ``prefix`` is not a short DNS label, or ``run_id`` is empty.
    """
    if not _PREFIX.match(prefix):
        raise InvalidParameterError(
            f"resource name prefix {prefix!r} must be a DNS label of <= 40 characters"
        )
    if not run_id:
        raise InvalidParameterError("the pipeline run id is empty: names would not be unique per run")
    digest = hashlib.sha256(f"{run_id}/{task_name}".encode()).hexdigest()[:12]
    return f"{prefix}-{digest}"


def label_value(value: str) -> str:
    """``value`` made a valid label value (<= 63 characters of ``[A-Za-z0-9_.-]``, alnum ends)."""
    cleaned = _LABEL_VALUE_INVALID.sub("-", value)[:63]
    return cleaned.strip("-_.")


def is_label_value(value: str) -> bool:
    """Whether the API server takes ``value`` as it is as a label value (at most 63 characters)."""
    return len(value) <= 63 and bool(_LABEL_VALUE.match(value))


def run_labels(run_id: str, task_name: str) -> dict[str, str]:
    """Labels of every object and pod a launcher creates for ``task_name`` of run ``run_id``."""
    return {
        PART_OF_LABEL: "kfstack",
        RUN_LABEL: label_value(run_id),
        TASK_LABEL: label_value(task_name),
    }


def batch_pod_labels(istio_mesh: bool) -> dict[str, str]:
    """The labels every batch pod kfstack launches carries besides its run labels: the workload
    label, and in a mesh the opt-out of both Istio data planes.

    Why out of the mesh: with classic sidecars a finished pod never completes (the proxy keeps
    running); with native sidecars torch's multi-node rendezvous through the proxy still fails
    (kubeflow/trainer#2794, #2872), and Katib's metrics collector waits for every root process of
    the pod, the proxy included. NetworkPolicies protect the namespace's batch pods instead.
    """
    labels = {WORKLOAD_LABEL: BATCH_WORKLOAD}
    if istio_mesh:
        labels |= {SIDECAR_INJECT_LABEL: "false", DATAPLANE_MODE_LABEL: "none"}
    return labels


def check_object_name(name: str, what: str) -> str | None:
    """Why ``name`` cannot name ``what`` (a Secret, a service account, a runtime: objects whose
    names are DNS-1123 subdomains), or None when it can. Checked where a value enters, so that a
    name with a backtick or a space never reaches a rendered object."""
    if DNS_SUBDOMAIN.match(name):
        return None
    return (
        f"{name!r} is not {what}'s name (parts of lowercase letters, digits and '-' joined by '.', "
        f"each starting and ending with a letter or digit, at most 253 characters)"
    )


def check_namespace_name(name: str) -> str | None:
    """Why ``name`` cannot name a namespace, or None when it can (a DNS-1123 label)."""
    if DNS_LABEL.match(name):
        return None
    return (
        f"{name!r} is not a namespace name (a DNS label: lowercase letters, digits and '-', "
        f"a letter or digit at each end, at most 63 characters)"
    )


def run_selector(run_id: str) -> str:
    """Label selector of everything the run created (used by the cleanup step)."""
    return f"{PART_OF_LABEL}=kfstack,{RUN_LABEL}={label_value(run_id)}"


@dataclasses.dataclass(frozen=True)
class RunContext:
    """The pipeline run and task a launcher works for (KFP placeholders fill them in), and the
    task's MLflow run where it is tracked (the pods it launches log into it)."""

    run_id: str
    task_name: str
    tracking: TaskTracking | None = None

    def tracking_env(self, trial: bool = False) -> dict[str, str]:
        """The launched pods' tracking variables (:meth:`TaskTracking.launched_env`); none where
        the task is not tracked."""
        return self.tracking.launched_env(trial) if self.tracking is not None else {}

    def tracking_secret(self) -> str:
        """The Secret the launched pods read the tracking credentials from; empty where the task
        is not tracked."""
        return self.tracking.secret if self.tracking is not None else ""

    def name(self, prefix: str) -> str:
        return resource_name(prefix, self.run_id, self.task_name)

    def labels(self) -> dict[str, str]:
        return run_labels(self.run_id, self.task_name)


def current_namespace(
    env: Mapping[str, str] | None = None,
    service_account_file: str = SERVICE_ACCOUNT_NAMESPACE_FILE,
) -> str:
    """The namespace this process runs in -- never a literal in code.

    See docs/architecture.md#no-environment-in-code.

    In order: ``$KFSTACK_NAMESPACE`` (the pipeline sets it from the pod's own
    ``metadata.namespace`` through the downward API), the service-account namespace file every
    pod has, the current kubeconfig context (a workstation).

    Raises:
        InvalidParameterError: None of them names a namespace.
    """
    env = os.environ if env is None else env
    if env.get(NAMESPACE_ENV):
        return env[NAMESPACE_ENV]
    try:
        with open(service_account_file, encoding="utf-8") as f:
            namespace = f.read().strip()
        if namespace:
            return namespace
    except OSError:
        pass
    try:
        from kubernetes import config

        _, context = config.list_kube_config_contexts()
        namespace = (context or {}).get("context", {}).get("namespace")
        if namespace:
            return namespace
    except Exception:
        pass
    raise InvalidParameterError(
        f"cannot tell which namespace to use: set {NAMESPACE_ENV}, run in a pod, or set a "
        f"namespace on the current kubeconfig context"
    )


def current_service_account(
    env: Mapping[str, str] | None = None, token_file: str = SERVICE_ACCOUNT_TOKEN_FILE
) -> str:
    """The service account this process runs as; empty when that cannot be told (a workstation).

    In order: ``$KFSTACK_SERVICE_ACCOUNT`` (the pipeline sets it from the pod's own
    ``spec.serviceAccountName`` through the downward API), the ``sub`` claim of the pod's
    service-account token (``system:serviceaccount:<namespace>:<name>``). The token is only
    decoded, not verified: the name labels what this process creates and names whom an error
    is about; the API server, not this, decides what it may do.
    """
    env = os.environ if env is None else env
    if env.get(SERVICE_ACCOUNT_ENV):
        return env[SERVICE_ACCOUNT_ENV]
    try:
        with open(token_file, encoding="utf-8") as f:
            payload = f.read().strip().split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (OSError, IndexError, ValueError):  # no token, not a JWT (base64 and JSON errors are ValueErrors)
        return ""
    subject = _SERVICE_ACCOUNT_SUBJECT.match(str(claims.get("sub", ""))) if isinstance(claims, dict) else None
    return subject["name"] if subject else ""
