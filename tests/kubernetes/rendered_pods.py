"""The pods a run creates, as label sets, and Kubernetes label-selector matching: what the
NetworkPolicies and the Istio AuthorizationPolicy of manifests/ select is checked against them.

Each pod's labels are the ones its pod template or object carries in what kfstack renders
(:func:`kfstack.pipelines.rendering.render`: the same builders a run calls), plus the labels the
controller that creates the pod adds and the policies select by, each cited where it is added.
Controllers add more labels than these; none of the others is a key a policy here selects on.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from kfstack.kubernetes import naming
from kfstack.pipelines import load_pipeline, rendering

# Spark labels its own pods by role (spark-operator v2.5.2 pkg/common/spark.go: LabelSparkRole,
# SparkRoleDriver, SparkRoleExecutor), and the operator copies the SparkApplication's own labels to
# the driver and to the executors, except those under Kueue's prefix
# (internal/controller/sparkapplication/submission.go, driverConfOption and executorConfOption;
# pkg/common/kueue.go, KueueLabelPrefix).
SPARK_ROLE = "spark-role"
SPARK_SKIPPED_LABEL_PREFIX = "kueue.x-k8s.io/"
# KServe 0.20 gives every predictor pod the InferenceService's labels, its predictor's labels and
# these two (pkg/controller/v1beta1/inferenceservice/components/predictor.go, buildObjectMeta), in
# both deployment modes.
KSERVE_SERVICE_LABEL = "serving.kserve.io/inferenceservice"
KSERVE_COMPONENT_LABEL = "component"
# KFP 2.17 labels every pipeline pod (backend/src/v2/compiler/argocompiler/argo.go, the
# Workflow's podMetadata), beside the labels a task adds with kfp-kubernetes (podMetadata of the
# task's executor in the compiled spec).
KFP_POD_LABEL = "pipelines.kubeflow.org/v2_component"
# What every batch pod carries, whatever the mesh (kfstack/kubernetes/naming.py).
BATCH_LABELS = {naming.WORKLOAD_LABEL: naming.BATCH_WORKLOAD}
PIPELINE = "flights-training"
RUN_ID = "3f9c1e2a-5b7d-4c8e-9a0b-1c2d3e4f5a6b"
# One render per training API and framework: every batch kind a run can create.
VARIANTS = (
    {"training_api": "v1"},
    {"training_api": "v1", "framework": "tensorflow"},
    {"training_api": "trainer-v2"},
)


@dataclasses.dataclass(frozen=True)
class Pod:
    """A pod of the run: what it is (``kind/role``) and its labels."""

    role: str
    labels: Mapping[str, str]


def selects(selector: Mapping, labels: Mapping[str, str]) -> bool:
    """Whether a Kubernetes ``LabelSelector`` selects ``labels`` (``matchLabels`` and
    ``matchExpressions``, ANDed; the empty selector selects everything).

    Raises:
        ValueError: An operator Kubernetes does not define, or values that do not fit it.
    """
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
        if operator in ("In", "NotIn"):
            if not values:
                raise ValueError(f"{operator} on {key!r} needs values")
            found = key in labels and labels[key] in values
            if found != (operator == "In"):
                return False
        elif operator in ("Exists", "DoesNotExist"):
            if values:
                raise ValueError(f"{operator} on {key!r} takes no values")
            if (key in labels) != (operator == "Exists"):
                return False
        else:
            raise ValueError(f"unknown label selector operator {operator!r}")
    return True


def _template_labels(template: Mapping) -> dict[str, str]:
    return dict((template.get("metadata") or {}).get("labels") or {})


def job_pods(job: Mapping, role_prefix: str = "") -> list[Pod]:
    """The pods of a batch job (SparkApplication, PyTorchJob, TFJob, TrainJob) as rendered."""
    kind, spec = job["kind"], job["spec"]
    prefix = f"{role_prefix}{kind}"
    if kind == "SparkApplication":
        copied = {
            key: value
            for key, value in (job["metadata"].get("labels") or {}).items()
            if not key.startswith(SPARK_SKIPPED_LABEL_PREFIX)
        }
        return [
            Pod(f"{prefix}/{role}", {**copied, **(spec[role].get("labels") or {}), SPARK_ROLE: role})
            for role in ("driver", "executor")
        ]
    if kind in ("PyTorchJob", "TFJob"):
        replicas = spec["pytorchReplicaSpecs" if kind == "PyTorchJob" else "tfReplicaSpecs"]
        return [Pod(f"{prefix}/{name}", _template_labels(r["template"])) for name, r in replicas.items()]
    if kind == "TrainJob":
        # Trainer v2 merges each runtime patch into the runtime's replicated job of that name, so
        # a node pod carries at least the patch's labels (whichever runtime it runs on).
        nodes = [
            Pod(
                f"{prefix}/{replicated['name']}", _template_labels(replicated["template"]["spec"]["template"])
            )
            for patch in spec.get("runtimePatches") or []
            for replicated in patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
        ]
        assert nodes, f"{job['metadata'].get('name')}: a TrainJob without a runtime patch for its nodes"
        return nodes
    raise AssertionError(f"no pods known for kind {kind}")


def predictor_pods(service: Mapping) -> list[Pod]:
    """The stable predictor's pod and a canary's (kfstack labels a canary's pods
    ``kfstack.dev/canary``, kfstack/kubernetes/inference_service.py)."""
    from kfstack.kubernetes.inference_service import CANARY_POD_LABEL

    labels = {
        **(service["metadata"].get("labels") or {}),
        **(service["spec"]["predictor"].get("labels") or {}),
        KSERVE_SERVICE_LABEL: service["metadata"]["name"],
        KSERVE_COMPONENT_LABEL: "predictor",
    }
    return [Pod("predictor", labels), Pod("predictor/canary", {**labels, CANARY_POD_LABEL: "true"})]


def kfp_task_pods(pipeline: str = PIPELINE) -> list[Pod]:
    """One pod per task of the compiled pipeline, with KFP's label and the task's own."""
    executors = compiled_platform_spec(pipeline)["deploymentSpec"]["executors"]
    pods = [
        Pod(
            f"kfp/{name}",
            {KFP_POD_LABEL: "true", **((executor.get("podMetadata") or {}).get("labels") or {})},
        )
        for name, executor in executors.items()
    ]
    assert pods, f"{pipeline}: no task executors in the compiled spec"
    return pods


def compiled_platform_spec(pipeline: str) -> dict:
    """The kubernetes platform section of the compiled pipeline (kfp-kubernetes' settings), as
    ``kfstack compile`` writes it (the second YAML document)."""
    import os
    import tempfile

    import yaml
    from kfp import compiler

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "pipeline.yaml")
        compiler.Compiler().compile(load_pipeline(pipeline), package_path=path)
        with open(path, encoding="utf-8") as f:
            documents = list(yaml.safe_load_all(f))
    (platform,) = [d for d in documents[1:] if d and "platforms" in d]
    return platform["platforms"]["kubernetes"]


def rendered_objects(values: Mapping[str, object]) -> list[dict]:
    """Every object a run of the flights pipeline with ``values`` creates (render)."""
    return [obj for task in rendering.render(PIPELINE, values, RUN_ID) for obj in task.objects]


def run_pods(extra: Mapping[str, object] | None = None) -> tuple[list[Pod], list[Pod]]:
    """(batch pods, predictor pods) of every variant's render, with ``extra`` parameters."""
    batch: list[Pod] = []
    predictors: list[Pod] = []
    for variant in VARIANTS:
        for obj in rendered_objects({**variant, **(extra or {})}):
            if obj["kind"] == "InferenceService":
                predictors += predictor_pods(obj)
            elif obj["kind"] == "Experiment":
                batch += job_pods(obj["spec"]["trialTemplate"]["trialSpec"], role_prefix="trial/")
            else:
                batch += job_pods(obj)
    return batch, predictors


def roles(pods: Iterable[Pod]) -> set[str]:
    return {pod.role for pod in pods}
