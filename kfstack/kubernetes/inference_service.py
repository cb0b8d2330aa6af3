"""KServe InferenceServices for a trained model: first rollout, canary, promotion, rollback.

Built with the ``kserve`` SDK models (v1beta1) in both deployment modes KServe 0.20+ has:

**Serverless** (Knative; annotation ``serving.kserve.io/deploymentMode: Serverless``, which
KServe 0.20 also calls ``Knative``). One predictor; every spec change makes a Knative revision.

- first rollout: the model at 100%;
- canary: the new predictor (its ``storageUri``, and the pool, service account and autoscaling
  this rollout asks for), labelled ``kfstack.dev/canary: "true"`` (predictor labels reach the
  revision's pods), with ``canaryTrafficPercent: C`` -- C% to the new revision,
  the rest to ``status.components.predictor.latestRolledoutRevision`` -- and
  ``serving.kserve.io/enable-tag-routing: "true"``, so the two are addressable apart
  (``latest-`` and ``prev-`` tagged URLs in ``status.components.predictor.traffic``);
- promote: drop ``canaryTrafficPercent`` and the canary label. This makes one more revision
  (same model, same image): KServe 0.20 writes the predictor's labels, and the
  InferenceService's own labels and annotations (kfstack's version annotations change here too),
  into the Knative revision template (``components/predictor.go`` ``buildObjectMeta``,
  ``reconcilers/knative/ksvc_reconciler.go``), and Knative makes a revision of every new
  template (``pkg/reconciler/configuration``). It takes 100% once Ready: without
  ``canaryTrafficPercent`` KServe routes 100% to the latest *ready* revision, so until then the
  analysed revision keeps serving, at 100% and still labelled (the rollout waits for the new
  one, :mod:`kfstack.serving.kserve_rollout`);
- roll back: ``canaryTrafficPercent: 0`` pins the previous rolled-out revision at 100%; the
  labelled canary revision stays at 0% (its pods scale away), and the next canary's spec makes
  a new one (its new ``storageUri``).

**Standard** (``RawDeployment``, annotation ``serving.kserve.io/deploymentMode: Standard``). A
named stable predictor; canaries are the ``spec.canary`` list (KServe >= 0.20), each its own
Deployment ``{isvc}-{name}-predictor`` and Service of the same name.

- first rollout: ``spec.predictor`` named after the model version;
- canary: one ``spec.canary`` entry ``{trafficPercent: C, predictor: {name, model}}``, with
  ``minReplicas: 1`` (a 0% canary would otherwise get no pod at all) and none of the autoscaling
  fields the webhook refuses on a canary;
- promote: retarget -- the stable predictor becomes the rollout's whole predictor (the canary's
  name and model, with the autoscaling a canary entry may not carry) and the entry goes (KServe
  keeps the canary's Deployment as the new stable one; its pods roll once, as the stable
  predictor does not carry the canary's pod label ``kfstack.dev/canary``, by which the alerts
  leave a canary's pods out: KServe 0.20 gives a canary's pods the stable predictor's labels);
- roll back: remove the entry.

**Autoscaling** (:mod:`kfstack.kubernetes.autoscaling`): Knative's KPA in Serverless mode; in
Standard mode KServe's default HPA, or the class this rollout names (``hpa``, or ``keda`` for
GPU use and queue length through Prometheus queries over the stable predictor's pods). The
class annotation and the predictor's autoscaling are written with the stable predictor: by the
first rollout and the promotion (which renames the stable Deployment, so its queries are
rebuilt), never by a Standard canary, whose pods have fixed replicas.

KServe routes the split only where it owns the ingress; the canary analysis does not rely on
it and calls both predictors directly (:func:`predictor_urls`).

A custom predictor's container is the ServingRuntime its request names (manifests/README.md,
"KServe"): ``predictor.model`` names its model format and runtime, and KServe's storage
initializer downloads ``storageUri`` to ``/mnt/models`` with the credentials of the predictor's
service account.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import re
import sys
from typing import Any

from kfstack.errors import DeploymentFailedError, InvalidParameterError
from kfstack.kubernetes import autoscaling, naming
from kfstack.kubernetes.naming import DNS_SUBDOMAIN
from kfstack.kubernetes.node_pools import NodePoolProfile
from kfstack.kubernetes.pods import to_dict
from kfstack.kubernetes.resources import KSERVE_MODE_ANNOTATION, SERVERLESS, STANDARD, kserve_mode
from kfstack.settings import Placeholder, Settings, setting

DEPLOYMENT_MODE_ANNOTATION = KSERVE_MODE_ANNOTATION
DEPLOYMENT_MODES = {SERVERLESS: "Serverless", STANDARD: "Standard"}
TAG_ROUTING_ANNOTATION = "serving.kserve.io/enable-tag-routing"
# The predictor container, in the ServingRuntime and in every InferenceService's model spec.
CONTAINER_NAME = "kserve-container"
# A canary's pods carry this label (KServe 0.20 labels them as the stable's, in both modes): the
# monitoring's PodMonitor reads it so that no alert fires on a canary
# (manifests/components/monitoring). A first rollout and the promoted predictor are written
# without it. (A cluster whose KServe config lists it in serviceLabelDisallowedList keeps it off
# Serverless revisions.)
CANARY_POD_LABEL = "kfstack.dev/canary"
# Which model version serves (confirmed: a first deployment that answered, a promoted canary),
# and which one is being rolled out and not confirmed yet (a canary, or a first deployment still
# on trial): written by every rollout step (the spec names storage URIs, not versions), read by
# the next deployment, the exit handler and `kubectl`.
MODEL_VERSION_ANNOTATION = "kfstack.dev/model-version"
# What an InferenceService made by hand (without kfstack's annotation) is called as production.
UNVERSIONED = "unversioned"
# The storageUri of the production model and of the one being rolled out, beside their versions:
# after a Serverless rollback the spec still names the rejected model (Knative serves the
# previous revision), so the spec alone cannot say what production serves.
MODEL_URI_ANNOTATION = "kfstack.dev/model-uri"
NEW_URI_ANNOTATION = "kfstack.dev/new-model-uri"
NEW_VERSION_ANNOTATION = "kfstack.dev/new-model-version"
# KServe's names built from an InferenceService's: Standard mode labels its pods
# ``app: isvc.<name>-<predictor>-predictor`` (a label value: at most 63 characters; the
# predictor name here is 12), Knative names revisions and routes after ``<name>-predictor``.
MAX_NAME_LENGTH = {STANDARD: 35, SERVERLESS: 45}
_NAME = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
API_VERSION = "serving.kserve.io/v1beta1"
KIND = "InferenceService"


def kserve_sdk() -> Any:
    """The ``kserve`` package. Importing it runs its model server's argument parser over
    ``sys.argv`` (``kserve/model_server.py``), which a foreign command line can break (a flag
    that abbreviates one of KServe's with a value of the wrong type exits the process), so it
    is imported with the program name alone on the command line."""
    if "kserve" not in sys.modules:
        saved = sys.argv
        sys.argv = saved[:1]
        try:
            import kserve  # noqa: F401 -- registers the module for the return below
        finally:
            sys.argv = saved
    return sys.modules["kserve"]


@dataclasses.dataclass(frozen=True)
class ServingRequest(Settings):
    """One rollout of a model to an InferenceService.

    Attributes:
        name: The InferenceService (DNS-1035 label).
        mode: :data:`SERVERLESS` or :data:`STANDARD`.
        storage_uri: The model directory (``s3://``, ``gs://``, ``pvc://``...).
        model_version: The model's version; names the Standard-mode predictor.
        profile: Node pool of the predictor pods (resources, node selector, tolerations).
        service_account: The predictor's service account (its Secrets let the storage
            initializer read ``storage_uri``); empty: the namespace's default.
        min_replicas, max_replicas: Autoscaling bounds; 0 minimum (scale to zero) needs
            Serverless.
        autoscaler: Standard mode's autoscaler class: empty (KServe's default, its HPA), ``hpa``
            or ``keda`` (:mod:`~kfstack.kubernetes.autoscaling`).
        scale_metric, scale_target: What the autoscaler scales on and its target per replica
            (:func:`~kfstack.kubernetes.autoscaling.scale_metrics`: Serverless
            ``concurrency``/``rps``; Standard ``cpu``/``memory`` utilisation percent, with KEDA
            also ``gpu`` (utilisation percent) and ``queue`` (requests waiting or in service));
            empty / 0: the default (:attr:`scaling`).
        prometheus_address: The Prometheus KEDA queries for ``gpu`` and ``queue``.
        keda_authentication: A KEDA TriggerAuthentication in the namespace for those queries;
            empty: none.
        keda_auth_modes: The authentication modes KEDA uses it in (comma-separated
            :data:`~kfstack.kubernetes.autoscaling.KEDA_AUTH_MODES`); required with it, as KEDA
            applies none without.
        queue_metric: The queue-length gauge ``queue`` sums over the predictor's pods; empty:
            the one kfstack knows for the server (:func:`~kfstack.kubernetes.autoscaling.queue_metric`).
        gpu_metric, gpu_pod_label, gpu_namespace_label: The GPU utilisation series and the
            labels naming the pod and namespace using the GPU (DCGM exporter's).
        namespace: The InferenceService's namespace (its queries select it); set by the
            rollout from its cluster.
        canary_traffic_percent: The canary's share of traffic while it is analysed.
        labels: Labels of the InferenceService (run id, pipeline...).
        model_format, model_format_version: ``predictor.model.modelFormat``: a standard format
            (``sklearn``, ``xgboost``, ``onnx``...) that KServe's own runtime for it serves, or
            the format a team's ServingRuntime declares.
        runtime: The ServingRuntime (or ClusterServingRuntime); empty: KServe picks the one that
            declares the format (``autoSelect``).
        protocol_version: ``predictor.model.protocolVersion`` (``v2`` for Triton, which speaks no
            V1); empty: the runtime's default.
        kfstack_server: The predictor runs kfstack's model server: the model is ``custom`` (a
            team's ``kserve.Model`` on kfstack's server), never concluded from a runtime's name.
            It takes kfstack's flags and exports kfstack's metrics.
        server_flags: kfstack's model-server flags, appended to the runtime's command line
            (``predictor.model.args``, which KServe adds after the runtime container's own) of
            kfstack's server only (``kfstack_server``).
    """

    concern = "serving request"

    # Built by keyword: the fields without a default go first, for the dataclass.
    storage_uri: str
    model_version: str
    profile: NodePoolProfile
    name: str = setting()
    mode: str = setting(choices=tuple(DEPLOYMENT_MODES))
    service_account: str = setting("")
    min_replicas: int = setting(1, ge=0)
    max_replicas: int = setting(3, ge=1)
    autoscaler: str = setting(autoscaling.AUTOSCALER_UNSET, choices=autoscaling.AUTOSCALERS)
    scale_metric: str = setting("")
    scale_target: int = setting(0, ge=0)
    prometheus_address: str = setting("")
    keda_authentication: str = setting("")
    keda_auth_modes: str = setting("")
    queue_metric: str = setting("")
    gpu_metric: str = setting(autoscaling.DCGM_GPU_UTIL)
    gpu_pod_label: str = setting(autoscaling.DCGM_POD_LABEL)
    gpu_namespace_label: str = setting(autoscaling.DCGM_NAMESPACE_LABEL)
    canary_traffic_percent: int = setting(10, ge=1, le=99)
    labels: dict[str, str] = dataclasses.field(default_factory=dict)
    model_format: str = ""
    model_format_version: str = ""
    runtime: str = ""
    protocol_version: str = ""
    namespace: str = ""
    kfstack_server: bool = False
    server_flags: tuple[str, ...] = ()

    def check(self) -> list[str]:
        if not self.concrete("mode"):
            return []  # the rules below are the mode's
        problems = []
        name, mode = self.argument("name"), self.argument("mode")
        longest = MAX_NAME_LENGTH[self.mode]
        if self.concrete("name") and (not _NAME.match(self.name) or len(self.name) > longest):
            problems.append(
                f"{name}={self.name!r}: an InferenceService name is a DNS-1035 label (lower-case "
                f"letters, digits and '-', starting with a letter) of at most {longest} "
                f"characters in {mode}={self.mode} (KServe derives longer names from it)"
            )
        if self.concrete("service_account") and self.service_account:
            problem = naming.check_object_name(self.service_account, "a service account")
            if problem:
                problems.append(f"{self.argument('service_account')}={problem}")
        if self.max_replicas < self.min_replicas:
            problems.append(
                f"{self.argument('min_replicas')}={self.min_replicas} must be <= "
                f"{self.argument('max_replicas')}={self.max_replicas}"
            )
        if self.min_replicas == 0 and self.mode == STANDARD:
            problems.append(
                f"{self.argument('min_replicas')}=0 (scale to zero) needs {mode}={SERVERLESS} (Knative)"
            )
        problems += self._scaling_problems()
        if not self.model_format:
            problems.append("the model format the InferenceService declares (modelFormat.name) is empty")
        if "://" not in self.storage_uri and not isinstance(self.storage_uri, Placeholder):
            problems.append(f"storage URI {self.storage_uri!r} has no scheme (s3://, gs://, pvc://...)")
        return problems

    def _scaling_problems(self) -> list[str]:
        """The autoscaling rules of KServe 0.20 (:mod:`kfstack.kubernetes.autoscaling`), and what
        kfstack needs to build GPU and queue queries."""
        mode, metric_name, autoscaler_name = (
            self.argument("mode"),
            self.argument("scale_metric"),
            self.argument("autoscaler"),
        )
        metric = self.scale_metric
        if self.mode == SERVERLESS:
            if self.autoscaler:
                return [
                    f"{autoscaler_name}={self.autoscaler}: KServe's autoscaler classes act in "
                    f"{mode}={STANDARD} only; {mode}={SERVERLESS} scales with Knative's KPA (leave it empty)"
                ]
            if metric in autoscaling.EXTERNAL_METRICS:
                return [
                    f"{metric_name}={metric!r}: in {mode}={SERVERLESS} (Knative) KServe ignores the "
                    f"autoScaling block GPU use and queue length need; Knative's queue-length "
                    f"equivalent is {metric_name}=concurrency (requests in flight per replica); GPU use "
                    f"needs {mode}={STANDARD} with {autoscaler_name}={autoscaling.KEDA}"
                ]
        metrics = autoscaling.scale_metrics(self.mode, self.autoscaler)
        if metric in autoscaling.EXTERNAL_METRICS and metric not in metrics:
            return [
                f"{metric_name}={metric!r} needs {autoscaler_name}={autoscaling.KEDA}: KServe's HPA "
                f"takes cpu and memory only (its webhook refuses other metric types for the hpa class, "
                f"and the HPA reconciler drops them)"
            ]
        if metric and metric not in metrics:
            return [f"{metric_name}={metric!r}: {mode}={self.mode} scales on {' or '.join(metrics)}"]
        metric, target = self.scaling
        if metric in autoscaling.PERCENT_METRICS and target > 100:
            return [
                f"{self.argument('scale_target')}={target}: {metric} scales on a utilisation percent, "
                f"at most 100 (0: the default)"
            ]
        problems = []
        for field, pattern, what in (
            ("keda_authentication", DNS_SUBDOMAIN, "a Kubernetes object name"),
            ("gpu_metric", autoscaling.METRIC_NAME, "a Prometheus metric name"),
            ("queue_metric", autoscaling.METRIC_NAME, "a Prometheus metric name"),
            ("gpu_pod_label", autoscaling.LABEL_NAME, "a Prometheus label name"),
            ("gpu_namespace_label", autoscaling.LABEL_NAME, "a Prometheus label name"),
        ):
            value = getattr(self, field)
            if value and self.concrete(field) and not pattern.match(value):
                problems.append(f"{self.argument(field)}={value!r} is not {what}")
        problems += self._authentication_problems()
        address = self.prometheus_address
        if (
            address
            and self.concrete("prometheus_address")
            and not address.startswith(("http://", "https://"))
        ):
            problems.append(f"{self.argument('prometheus_address')}={address!r} is not an http(s):// URL")
        if metric not in autoscaling.EXTERNAL_METRICS:
            return problems
        if not address:
            problems.append(
                f"{metric_name}={metric} needs {self.argument('prometheus_address')}: the Prometheus "
                f"KEDA queries (e.g. http://prometheus-operated.monitoring.svc:9090); there is no default"
            )
        if metric == autoscaling.GPU:
            problem = autoscaling.gpu_problem(self.profile, self.gpu_metric)
            if problem:
                problems.append(f"{metric_name}=gpu: {problem}")
        elif metric == autoscaling.QUEUE and self.concrete("queue_metric"):
            series, why = autoscaling.queue_metric(
                self.kfstack_server, self.model_format, self.runtime, self.queue_metric
            )
            if series is None:
                problems.append(
                    f"{metric_name}=queue: {why}; name the queue gauge the runtime exports and your "
                    f"Prometheus scrapes with its pod and namespace labels in "
                    f"{self.argument('queue_metric')}, or scale on cpu or memory"
                )
        return problems

    def _authentication_problems(self) -> list[str]:
        """A TriggerAuthentication and its modes come together: KServe writes ``authModes`` into
        KEDA's trigger only when it is set, and KEDA applies no authentication without it
        (:data:`~kfstack.kubernetes.autoscaling.KEDA_AUTH_MODES`)."""
        if not self.concrete("keda_authentication", "keda_auth_modes"):
            return []
        authentication, modes = self.argument("keda_authentication"), self.argument("keda_auth_modes")
        if self.keda_authentication and not self.keda_auth_modes:
            return [
                f"{authentication}={self.keda_authentication!r} needs {modes}: KEDA's Prometheus scaler "
                f"uses a TriggerAuthentication only in the modes its trigger lists (one of bearer, basic; "
                f"and/or tls, custom), and sends no credentials without them"
            ]
        if self.keda_auth_modes and not self.keda_authentication:
            return [
                f"{modes}={self.keda_auth_modes!r} needs {authentication}: the KEDA TriggerAuthentication "
                f"holding the credentials those modes use"
            ]
        if self.keda_auth_modes:
            problem = autoscaling.auth_modes_problem(self.keda_auth_modes)
            if problem:
                return [f"{modes}={self.keda_auth_modes!r}: {problem}"]
        return []

    @property
    def scaling(self) -> tuple[str, int]:
        """The scale metric and target written into the predictor (the defaults where none is
        given: the mode's first metric, and :data:`~kfstack.kubernetes.autoscaling.DEFAULT_TARGETS`)."""
        metric = self.scale_metric or autoscaling.scale_metrics(self.mode, self.autoscaler)[0]
        return metric, self.scale_target or autoscaling.DEFAULT_TARGETS[metric]

    def in_namespace(self, namespace: str) -> ServingRequest:
        """The request for a service in ``namespace`` (its queries select the namespace's pods)."""
        return dataclasses.replace(self, namespace=namespace)

    def autoscaling_metrics(self, predictor_name: str) -> list[dict[str, Any]]:
        """KServe's ``autoScaling.metrics`` of the predictor named ``predictor_name`` under KEDA.

        Raises:
            InvalidParameterError: A GPU or queue query without the service's namespace.
        """
        metric, target = self.scaling
        if metric not in autoscaling.EXTERNAL_METRICS:
            return [autoscaling.resource_metric(metric, target)]
        if not self.namespace:
            raise InvalidParameterError(
                f"InferenceService {self.name}: the {metric} query selects the service's namespace, "
                f"which this request does not name"
            )
        deployment = autoscaling.predictor_deployment(self.name, predictor_name)
        if metric == autoscaling.GPU:
            accelerator = self.profile.accelerator
            query = autoscaling.external_query(
                self.gpu_metric,
                self.namespace,
                deployment,
                self.gpu_pod_label,
                self.gpu_namespace_label,
                divisor=accelerator.count if accelerator else 1,
            )
        else:
            series, _ = autoscaling.queue_metric(
                self.kfstack_server, self.model_format, self.runtime, self.queue_metric
            )
            # Labels the PodMonitor puts on every scraped model server series.
            query = autoscaling.external_query(str(series), self.namespace, deployment, "pod", "namespace")
        return [
            autoscaling.external_metric(
                self.prometheus_address, query, target, self.keda_authentication, self.keda_auth_modes
            )
        ]

    def labelled(self, labels: dict[str, str]) -> ServingRequest:
        """The request with ``labels`` added (a run's: its exit handler finds the run's canary by them)."""
        return dataclasses.replace(self, labels={**self.labels, **labels})

    @property
    def predictor_name(self) -> str:
        """A DNS label for the model version (Standard mode's predictor and canary names)."""
        return "m-" + hashlib.sha256(self.model_version.encode()).hexdigest()[:10]


def _model(request: ServingRequest) -> Any:
    kserve = kserve_sdk()
    resources = request.profile.resources()
    return kserve.V1beta1ModelSpec(
        # What KServe's defaulting names it anyway; explicit, because the CRD requires a name on a
        # canary's model (and the SDK would otherwise write "").
        name=CONTAINER_NAME,
        model_format=kserve.V1beta1ModelFormat(
            name=request.model_format, version=request.model_format_version or None
        ),
        runtime=request.runtime or None,
        protocol_version=request.protocol_version or None,
        storage_uri=request.storage_uri,
        # KServe's and a team's own runtimes take no kfstack flag (one may exit on it).
        args=(list(request.server_flags) or None) if request.kfstack_server else None,
        resources={"requests": resources["requests"], "limits": resources["limits"]},
    )


def _predictor(request: ServingRequest, named: bool, autoscaled: bool = True, canary: bool = False) -> Any:
    kserve = kserve_sdk()
    pod = request.profile.pod_settings()
    fields: dict[str, Any] = {
        "model": _model(request),
        "node_selector": pod["nodeSelector"] or None,
        "tolerations": pod["tolerations"] or None,
        "service_account_name": request.service_account or None,
    }
    if named:
        fields["name"] = request.predictor_name
    if autoscaled:
        fields.update(min_replicas=request.min_replicas, max_replicas=request.max_replicas)
        if request.autoscaler == autoscaling.KEDA:
            # KServe refuses scaleMetric under KEDA: the metric is an autoScaling entry.
            fields["auto_scaling"] = kserve.V1beta1AutoScalingSpec(
                metrics=request.autoscaling_metrics(request.predictor_name)
            )
        else:
            fields.update(scale_metric=request.scaling[0], scale_target=request.scaling[1])
    else:
        fields["min_replicas"] = 1
    if canary:
        fields["labels"] = {CANARY_POD_LABEL: "true"}
    return kserve.V1beta1PredictorSpec(**fields)


def first_rollout(request: ServingRequest) -> dict:
    """A new InferenceService serving the model at 100%, on trial until :func:`confirmed`."""
    kserve = kserve_sdk()
    from kubernetes import client

    annotations = {
        DEPLOYMENT_MODE_ANNOTATION: DEPLOYMENT_MODES[request.mode],
        NEW_VERSION_ANNOTATION: request.model_version,
        NEW_URI_ANNOTATION: request.storage_uri,
    }
    if request.mode == SERVERLESS:
        annotations[TAG_ROUTING_ANNOTATION] = "true"
    _set_autoscaler(annotations, request)
    isvc = kserve.V1beta1InferenceService(
        api_version=API_VERSION,
        kind=KIND,
        metadata=client.V1ObjectMeta(name=request.name, labels=dict(request.labels), annotations=annotations),
        spec=kserve.V1beta1InferenceServiceSpec(
            predictor=_predictor(request, named=request.mode == STANDARD)
        ),
    )
    return _admitted(to_dict(isvc))


def _set_autoscaler(annotations: dict, request: ServingRequest) -> None:
    """The autoscaler class annotation of the stable predictor ``request`` describes (none:
    KServe's default)."""
    if request.autoscaler:
        annotations[autoscaling.AUTOSCALER_CLASS_ANNOTATION] = request.autoscaler
    else:
        annotations.pop(autoscaling.AUTOSCALER_CLASS_ANNOTATION, None)


def _admitted(desired: dict) -> dict:
    """``desired``, checked against KServe's webhook rules on autoscaling before it is sent.

    Raises:
        InvalidParameterError: The webhook would refuse it (the live service's autoscaling,
            kept by a Standard canary or a rollback, can be one kfstack did not write).
    """
    problems = autoscaling.webhook_problems(desired)
    if problems:
        raise InvalidParameterError(
            f"InferenceService {desired['metadata']['name']}: KServe's webhook would refuse it: "
            + "; ".join(problems)
        )
    return desired


def canary_rollout(current: dict, request: ServingRequest) -> dict:
    """The live InferenceService with the new model as its canary (see the module docstring).

    Raises:
        InvalidParameterError: The service is in the other deployment mode, or already has a canary.
    """
    desired = _desired(current, request)
    spec = desired["spec"]
    annotations = desired["metadata"].setdefault("annotations", {})
    if canary_in_progress(current):
        raise InvalidParameterError(f"InferenceService {request.name} already has a canary in progress")
    if annotations.get(MODEL_VERSION_ANNOTATION) == request.model_version or (
        request.mode == STANDARD and spec["predictor"].get("name") == request.predictor_name
    ):
        raise InvalidParameterError(
            f"InferenceService {request.name} already serves model version {request.model_version}"
        )
    if request.mode == STANDARD:
        _check_standard_placement(spec["predictor"], request)
    annotations[NEW_VERSION_ANNOTATION] = request.model_version
    annotations[NEW_URI_ANNOTATION] = request.storage_uri
    if request.mode == SERVERLESS:
        # The whole predictor as this request asks for it (pool, service account, autoscaling):
        # it all becomes the new revision, and a rollback returns to the previous one's.
        spec["predictor"] = {
            **to_dict(_predictor(request, named=False, canary=True)),
            "canaryTrafficPercent": request.canary_traffic_percent,
        }
        annotations[TAG_ROUTING_ANNOTATION] = "true"
    else:
        kserve = kserve_sdk()
        entry = kserve.V1beta1CanarySpec(
            traffic_percent=request.canary_traffic_percent,
            predictor=_predictor(request, named=True, autoscaled=False, canary=True),
        )
        spec["canary"] = [to_dict(entry)]
    return _admitted(desired)


def confirmed(current: dict, request: ServingRequest) -> dict:
    """The InferenceService of a first deployment that answered, with ``request``'s version
    recorded as the one in production.

    Raises:
        InvalidParameterError: The service is not ``request``'s first deployment on trial.
    """
    desired = _copy(current)
    annotations = desired["metadata"].setdefault("annotations", {})
    if (
        canary_in_progress(current)
        or MODEL_VERSION_ANNOTATION in annotations
        or annotations.get(NEW_VERSION_ANNOTATION) != request.model_version
    ):
        raise InvalidParameterError(
            f"InferenceService {request.name} is not the first deployment of model version "
            f"{request.model_version}"
        )
    _record_production(annotations, request)
    return desired


def promoted(current: dict, request: ServingRequest) -> dict:
    """The InferenceService with ``request``'s canary serving 100% (the previous model gone).

    Standard mode retargets: the stable predictor becomes the request's whole predictor -- the
    canary's name and model, and the autoscaling a canary entry may not carry.

    Raises:
        InvalidParameterError: The service's canary is not ``request``'s model version.
    """
    desired = _copy(current)
    spec = desired["spec"]
    annotations = desired["metadata"].setdefault("annotations", {})
    if not canary_in_progress(current) or annotations.get(NEW_VERSION_ANNOTATION) != request.model_version:
        raise InvalidParameterError(
            f"InferenceService {request.name} has no canary of model version {request.model_version} "
            f"to promote"
        )
    _record_production(annotations, request)
    if kserve_mode(current) == SERVERLESS:
        # A new revision of the same model, without the canary label (see the module docstring).
        predictor = spec["predictor"]
        predictor.pop("canaryTrafficPercent", None)
        labels = predictor.pop("labels", None) or {}
        labels.pop(CANARY_POD_LABEL, None)
        if labels:
            predictor["labels"] = labels
        return _admitted(desired)
    spec.pop("canary")
    spec["predictor"] = to_dict(_predictor(request, named=True))
    _set_autoscaler(annotations, request)
    return _admitted(desired)


def _record_production(annotations: dict, request: ServingRequest) -> None:
    """The version (and storage) being rolled out becomes production's."""
    annotations[MODEL_VERSION_ANNOTATION] = annotations.pop(NEW_VERSION_ANNOTATION)
    annotations[MODEL_URI_ANNOTATION] = annotations.pop(NEW_URI_ANNOTATION, None) or request.storage_uri


def rolled_back(current: dict) -> dict:
    """The InferenceService serving its previous model at 100% again."""
    desired = _copy(current)
    for annotation in (NEW_VERSION_ANNOTATION, NEW_URI_ANNOTATION):
        desired["metadata"].get("annotations", {}).pop(annotation, None)
    if kserve_mode(current) == SERVERLESS:
        desired["spec"]["predictor"]["canaryTrafficPercent"] = 0
    else:
        desired["spec"].pop("canary", None)
    return desired


def canary_in_progress(isvc: dict) -> bool:
    """Whether the service has a canary that was neither promoted nor rolled back."""
    if kserve_mode(isvc) == SERVERLESS:
        return _serverless_canary_percent(isvc) > 0
    return bool(isvc["spec"].get("canary"))


def model_versions(isvc: dict) -> tuple[str | None, str | None]:
    """The version in production (None before one was confirmed) and the one being rolled out
    (None without one: a canary, or a first deployment on trial), from the annotations."""
    annotations = isvc["metadata"].get("annotations") or {}
    return annotations.get(MODEL_VERSION_ANNOTATION), annotations.get(NEW_VERSION_ANNOTATION)


def production_version(isvc: dict) -> str | None:
    """The version in production (``unversioned`` for a service made without kfstack's
    annotations); None for a first deployment still on trial (it failed its probe, or its task
    was killed): the next rollout deploys first again instead of canarying against it."""
    production, new = model_versions(isvc)
    if production is None and new is not None and not canary_in_progress(isvc):
        return None
    return production or UNVERSIONED


def production_model(isvc: dict) -> tuple[str, str] | None:
    """``(version, storageUri)`` of the model in production (:func:`production_version`); None
    when nothing is. The storage is what kfstack recorded when the version went into
    production (:data:`MODEL_URI_ANNOTATION`), for a service made otherwise its spec's.

    Raises:
        DeploymentFailedError: A Serverless service without the record that has had a canary:
            its spec names the canary's model and production's is in a Knative revision alone.
    """
    version = production_version(isvc)
    if version is None:
        return None
    recorded = (isvc["metadata"].get("annotations") or {}).get(MODEL_URI_ANNOTATION)
    if recorded:
        return version, recorded
    # A service kfstack did not make (or made before it recorded the storage): the spec's model
    # is production's unless a Serverless canary is in progress or was rolled back, when the
    # spec names the canary's and production is a Knative revision only.
    if kserve_mode(isvc) == SERVERLESS and "canaryTrafficPercent" in (isvc["spec"].get("predictor") or {}):
        raise DeploymentFailedError(
            f"InferenceService {isvc['metadata']['name']} has had a canary and records no "
            f"{MODEL_URI_ANNOTATION}: its spec names the canary's model, not production's; set the "
            f"annotation to the production model's storageUri"
        )
    storage_uri = ((isvc["spec"].get("predictor") or {}).get("model") or {}).get("storageUri")
    if not storage_uri:
        raise DeploymentFailedError(
            f"InferenceService {isvc['metadata']['name']} names no predictor.model.storageUri"
        )
    return version, storage_uri


def _check_standard_placement(stable: dict, request: ServingRequest) -> None:
    """Standard mode: KServe builds a canary's pods over a copy of the stable predictor's
    (fields the entry leaves empty are inherited, maps merged), so a canary cannot leave the
    stable's pool or service account; refuses one that would.

    Raises:
        InvalidParameterError: The request places the predictor elsewhere.
    """
    wanted = to_dict(_predictor(request, named=True, autoscaled=False))
    fields = {
        "serving_pool": ("nodeSelector", "tolerations"),
        "serving_service_account": ("serviceAccountName",),
    }
    moved = [
        parameter for parameter, keys in fields.items() if any(stable.get(k) != wanted.get(k) for k in keys)
    ]
    resources = (stable.get("model") or {}).get("resources")
    if resources != wanted["model"].get("resources") and "serving_pool" not in moved:
        moved.append("serving_pool")
    if moved:
        raise InvalidParameterError(
            f"InferenceService {request.name} (Standard mode): KServe builds a canary over the stable "
            f"predictor's pod spec, so a canary cannot change {' or '.join(moved)}; keep the live "
            f"service's, or deploy under another serving_name"
        )


def _serverless_canary_percent(isvc: dict) -> int:
    """A Serverless canary's share; 0 when there is none (no field, or 0 after a rollback)."""
    return int(isvc["spec"]["predictor"].get("canaryTrafficPercent") or 0)


def _copy(current: dict) -> dict:
    """The parts of a live object a replace sends back: metadata that identifies it, and spec."""
    metadata = current["metadata"]
    # resourceVersion: the update is refused (409) if the service changed since it was read;
    # finalizers and owners: KServe's own, kept as they are.
    identity = ("name", "labels", "annotations", "resourceVersion", "finalizers", "ownerReferences")
    kept = {k: copy.deepcopy(metadata[k]) for k in identity if k in metadata}
    return {
        "apiVersion": current["apiVersion"],
        "kind": current["kind"],
        "metadata": kept,
        "spec": copy.deepcopy(current["spec"]),
    }


def _desired(current: dict, request: ServingRequest) -> dict:
    if kserve_mode(current) != request.mode:
        raise InvalidParameterError(
            f"InferenceService {request.name} runs in {kserve_mode(current)} mode; KServe does not change a "
            f"service's mode: deploy with serving_mode={kserve_mode(current)} or under another name"
        )
    desired = _copy(current)
    desired["metadata"]["labels"] = {**desired["metadata"].get("labels", {}), **request.labels}
    return desired


def predictor_urls(isvc: dict, namespace: str) -> tuple[str, str | None]:
    """In-cluster base URLs of the stable predictor and of the canary (None without one).

    Serverless: the ``prev`` and ``latest`` tags of the route (tag routing on), through the
    Service Knative creates in the namespace for each tag, ``{tag}-{isvc}-predictor`` (the URLs
    in ``status.components.predictor.traffic`` are the cluster's external domain, which a pod
    may not resolve); the tags must be in the status. Standard: the predictors' own Services,
    ``{isvc}-{name}-predictor``.
    """
    name = isvc["metadata"]["name"]
    spec = isvc["spec"]
    if kserve_mode(isvc) == STANDARD:
        stable_name = spec["predictor"].get("name")
        stable = f"{name}-{stable_name}-predictor" if stable_name else f"{name}-predictor"
        canaries = spec.get("canary") or []
        canary = f"{name}-{canaries[0]['predictor']['name']}-predictor" if canaries else None
        base = f".{namespace}.svc.cluster.local"
        return f"http://{stable}{base}", (f"http://{canary}{base}" if canary else None)
    traffic = (((isvc.get("status") or {}).get("components") or {}).get("predictor") or {}).get(
        "traffic"
    ) or []
    tags = {t.get("tag") for t in traffic}
    base = f"{name}-predictor.{namespace}.svc.cluster.local"
    if not _serverless_canary_percent(isvc):
        return f"http://{base}", None
    stable = f"http://prev-{base}" if "prev" in tags else ""
    return stable, (f"http://latest-{base}" if "latest" in tags else None)
