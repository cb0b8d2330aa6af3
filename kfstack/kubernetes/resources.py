"""The custom resources kfstack launches, and how to read their state.

Each :class:`ResourceKind` knows its API coordinates, its :class:`Lifecycle`, how its
``status`` maps onto a :class:`Phase`, what to say about a failure, and which pod's log explains
it (the *primary* pod: the PyTorchJob master, the TFJob chief or worker 0, the TrainJob's
node 0, the Spark driver, a failed Katib trial's primary pod).

Two lifecycles (docs/architecture.md#two-lifecycles). An **owned batch job** (SparkApplication,
PyTorchJob, TFJob, TrainJob, Katib Experiment) belongs to one pipeline run: it is adopted on retry,
deleted on timeout or cancel and by the run's cleanup. A **long-lived service** (KServe's
InferenceService) outlives the run: it is applied, awaited until its status shows the state just
applied, and never deleted by a timeout, a cancel or the cleanup -- its failure handling is a
rollback.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable


class Lifecycle(enum.Enum):
    BATCH = "owned batch job"
    SERVICE = "long-lived service"


class Phase(enum.Enum):
    PENDING = "Pending"  # accepted, not yet running (e.g. suspended until Kueue admits it)
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"  # a batch job finished; a service is Ready at its generation
    FAILED = "Failed"

    @property
    def finished(self) -> bool:
        return self in (Phase.SUCCEEDED, Phase.FAILED)


@dataclasses.dataclass(frozen=True)
class PodRef:
    """How to find the primary pod: by name, else by label selector; and its container."""

    name: str | None
    selector: str | None
    container: str


@dataclasses.dataclass(frozen=True)
class TrialContract:
    """What a Katib trial template running this kind declares (Katib v0.19's own defaults for
    the kind, written out so that the tuning step states them rather than relies on them).

    Attributes:
        success_condition, failure_condition: GJSON expressions over the job object.
        primary_pod_labels: The labels of the pod whose stdout the metrics collector reads (the
            chief: it prints the metric lines).
        primary_container: That pod's trainer container.
    """

    success_condition: str
    failure_condition: str
    primary_pod_labels: dict[str, str]
    primary_container: str


def _condition_true(condition_type: str) -> str:
    return f'status.conditions.#(type=="{condition_type}")#|#(status=="True")#'


@dataclasses.dataclass(frozen=True)
class ResourceKind:
    kind: str
    group: str
    version: str
    plural: str
    phase: Callable[[dict], Phase]
    describe: Callable[[dict], str]
    primary_pod: Callable[[dict], PodRef]
    lifecycle: Lifecycle = Lifecycle.BATCH
    # What installs the API (named when a cluster does not serve it).
    provided_by: str = ""
    # How a Katib trial of this kind ends and where its metrics are read; None: not a trial kind.
    trial: TrialContract | None = None

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"


# --- training-operator jobs (PyTorchJob, TFJob) ----------------------------------------------


def _conditions(obj: dict) -> list[dict]:
    return (obj.get("status") or {}).get("conditions") or []


def _true_conditions(obj: dict) -> set[str]:
    """The types of the object's conditions whose status is True."""
    return {c.get("type", "") for c in _conditions(obj) if c.get("status") == "True"}


def training_job_phase(obj: dict) -> Phase:
    """From ``status.conditions``: Succeeded/Failed when one is True, else Running or Pending."""
    true = _true_conditions(obj)
    if "Failed" in true:
        return Phase.FAILED
    if "Succeeded" in true:
        return Phase.SUCCEEDED
    if "Suspended" in true:
        return Phase.PENDING
    if true & {"Running", "Restarting"}:
        return Phase.RUNNING
    return Phase.PENDING


def describe_training_job(obj: dict) -> str:
    lines = [
        f"  {c.get('type')}={c.get('status')} reason={c.get('reason', '')}: {c.get('message', '')}"
        for c in _conditions(obj)
    ]
    return "conditions:\n" + ("\n".join(lines) if lines else "  (none reported)")


def primary_replica_type(job: dict) -> str:
    """The replica type of a PyTorchJob's or TFJob's primary pod: ``Master`` or ``Chief`` where
    the job has one, else ``Worker`` (its worker 0). The operator labels that pod
    ``job-role=master``: Katib's primary pod, and the one whose log explains a failure."""
    spec = job.get("spec") or {}
    replica_types = set(spec.get("pytorchReplicaSpecs") or spec.get("tfReplicaSpecs") or {})
    return next((r for r in ("Master", "Chief") if r in replica_types), "Worker")


def _training_primary_pod(container: str) -> Callable[[dict], PodRef]:
    def primary(obj: dict) -> PodRef:
        name = obj["metadata"]["name"]
        # The operator's label values are the replica types in lower case.
        role = primary_replica_type(obj).lower()
        selector = (
            f"training.kubeflow.org/job-name={name},"
            f"training.kubeflow.org/replica-type={role},"
            f"training.kubeflow.org/replica-index=0"
        )
        return PodRef(name=None, selector=selector, container=container)

    return primary


def _training_operator_kind(kind: str, container: str) -> ResourceKind:
    """A training-operator v1 job: its status conditions and its primary replica's pod."""
    return ResourceKind(
        kind=kind,
        group="kubeflow.org",
        version="v1",
        plural=f"{kind.lower()}s",
        phase=training_job_phase,
        describe=describe_training_job,
        primary_pod=_training_primary_pod(container),
        provided_by="the Kubeflow training-operator v1.9",
        # The operator labels the PyTorchJob master, the TFJob chief -- or TFJob worker 0 when
        # there is no chief -- with job-role=master.
        trial=TrialContract(
            success_condition=_condition_true("Succeeded"),
            failure_condition=_condition_true("Failed"),
            primary_pod_labels={"training.kubeflow.org/job-role": "master"},
            primary_container=container,
        ),
    )


PYTORCHJOB = _training_operator_kind("PyTorchJob", "pytorch")
TFJOB = _training_operator_kind("TFJob", "tensorflow")


# --- Kubeflow Trainer v2 (TrainJob) -----------------------------------------------------------


def trainjob_phase(obj: dict) -> Phase:
    """From ``status.conditions`` (``Complete``, ``Failed``, ``Suspended``) and, while none is
    True, the child Jobs: Running once one of them has an active pod, else Pending."""
    true = _true_conditions(obj)
    if "Failed" in true:
        return Phase.FAILED
    if "Complete" in true:
        return Phase.SUCCEEDED
    if "Suspended" in true:
        return Phase.PENDING
    jobs = (obj.get("status") or {}).get("jobsStatus") or []
    if any(job.get("active") or job.get("ready") for job in jobs):
        return Phase.RUNNING
    return Phase.PENDING


# The torch runtimes' replicated job and trainer container: both "node".
TRAINJOB_NODE = "node"
# Node 0's pod among a TrainJob's pods: the JobSet runs replicated job "node" as one Indexed Job
# with a pod per node, so node i is completion index i (PET_NODE_RANK is read from it).
TRAINJOB_NODE0_LABELS = {
    "jobset.sigs.k8s.io/replicatedjob-name": TRAINJOB_NODE,
    "batch.kubernetes.io/job-completion-index": "0",
}


def _trainjob_primary_pod(obj: dict) -> PodRef:
    """Node 0's pod of this TrainJob (JobSet names its JobSet, and labels the pods, after it)."""
    labels = {"jobset.sigs.k8s.io/jobset-name": obj["metadata"]["name"], **TRAINJOB_NODE0_LABELS}
    selector = ",".join(f"{key}={value}" for key, value in labels.items())
    return PodRef(name=None, selector=selector, container=TRAINJOB_NODE)


TRAINJOB = ResourceKind(
    kind="TrainJob",
    group="trainer.kubeflow.org",
    version="v1alpha1",
    plural="trainjobs",
    phase=trainjob_phase,
    describe=describe_training_job,
    primary_pod=_trainjob_primary_pod,
    provided_by="Kubeflow Trainer v2.3",
    trial=TrialContract(
        success_condition=_condition_true("Complete"),
        failure_condition=_condition_true("Failed"),
        primary_pod_labels=dict(TRAINJOB_NODE0_LABELS),
        primary_container=TRAINJOB_NODE,
    ),
)


# --- SparkApplication -------------------------------------------------------------------------

SPARK_SUCCEEDED = ("COMPLETED",)
SPARK_FAILED = ("FAILED", "SUBMISSION_FAILED")
SPARK_PENDING = ("", "NEW", "SUBMITTED", "PENDING_RERUN")


def _spark_state(obj: dict) -> dict:
    return (obj.get("status") or {}).get("applicationState") or {}


def spark_phase(obj: dict) -> Phase:
    """From ``status.applicationState.state`` (spark-operator's state machine)."""
    state = _spark_state(obj).get("state", "")
    if state in SPARK_SUCCEEDED:
        return Phase.SUCCEEDED
    if state in SPARK_FAILED:
        return Phase.FAILED
    if state in SPARK_PENDING:
        return Phase.PENDING
    return Phase.RUNNING  # RUNNING, SUCCEEDING, FAILING, INVALIDATING, UNKNOWN


def describe_spark(obj: dict) -> str:
    state = _spark_state(obj)
    message = state.get("errorMessage") or "(no error message)"
    return f"applicationState: {state.get('state', '(none)')}: {message}"


def _spark_primary_pod(obj: dict) -> PodRef:
    driver = ((obj.get("status") or {}).get("driverInfo") or {}).get("podName")
    name = obj["metadata"]["name"]
    # The operator names the driver <app>-driver unless the spec says otherwise.
    return PodRef(name=driver or f"{name}-driver", selector=None, container="spark-kubernetes-driver")


SPARK_APPLICATION = ResourceKind(
    kind="SparkApplication",
    group="sparkoperator.k8s.io",
    version="v1beta2",
    plural="sparkapplications",
    phase=spark_phase,
    describe=describe_spark,
    primary_pod=_spark_primary_pod,
    provided_by="the Kubeflow spark-operator 2.5",
)

# --- Katib (Experiment, and the Trials it owns) -----------------------------------------------

KATIB_EXPERIMENT_LABEL = "katib.kubeflow.org/experiment"  # on every Trial of the Experiment
KATIB_SUGGESTION_LABEL = "katib.kubeflow.org/suggestion"  # on the suggestion (algorithm) pod
KATIB_TRIAL_LABEL = "katib.kubeflow.org/trial"  # on every pod of a trial (Katib's pod webhook)
KATIB_SUGGESTION_CONTAINER = "suggestion"
# Experiment condition reasons (Katib v0.19, experiment/util/status_util.go).
EXPERIMENT_GOAL_REACHED = "ExperimentGoalReached"


def experiment_phase(obj: dict) -> Phase:
    """From ``status.conditions``: Succeeded/Failed when one is True, Running while the
    Experiment runs or restarts (a resumed Experiment), else Pending."""
    true = _true_conditions(obj)
    if "Failed" in true:
        return Phase.FAILED
    if "Succeeded" in true:
        return Phase.SUCCEEDED
    if true & {"Running", "Restarting"}:
        return Phase.RUNNING
    return Phase.PENDING


def describe_experiment(obj: dict) -> str:
    """The conditions, the trial counts and the best trial so far."""
    status = obj.get("status") or {}
    counts = ", ".join(
        f"{label} {status.get(key, 0)}"
        for key, label in (
            ("trialsSucceeded", "succeeded"),
            ("trialsFailed", "failed"),
            ("trialsEarlyStopped", "early stopped"),
            ("trialMetricsUnavailable", "metrics unavailable"),
            ("trialsKilled", "killed"),
        )
    )
    lines = [describe_training_job(obj), f"trials: {status.get('trials', 0)} ({counts})"]
    optimal = status.get("currentOptimalTrial") or {}
    if optimal.get("bestTrialName"):
        assignments = ", ".join(
            f"{a.get('name')}={a.get('value')}" for a in optimal.get("parameterAssignments") or []
        )
        metrics = "; ".join(
            f"{m.get('name')} min={m.get('min')} max={m.get('max')} latest={m.get('latest')}"
            for m in (optimal.get("observation") or {}).get("metrics") or []
        )
        lines.append(f"current optimal trial: {optimal['bestTrialName']} ({assignments}): {metrics}")
    else:
        lines.append("current optimal trial: none yet")
    return "\n".join(lines)


def _experiment_primary_pod(obj: dict) -> PodRef:
    """The primary pod of the Experiment's last failed trial, else its suggestion pod.

    A trial's job is named after the trial and is of the trial template's kind, so that kind's
    own :attr:`ResourceKind.primary_pod` finds the pod. Katib lists failed trials in the order
    the API lists Trials (by name), so "last" is one failed trial, not necessarily the latest.
    With no failed trial (a timeout, or the Experiment itself failed), the suggestion pod (the
    algorithm service; Katib deletes it when the Experiment ends unless resumePolicy is
    LongRunning) is the one whose log can explain it.
    """
    status = obj.get("status") or {}
    template = (obj.get("spec") or {}).get("trialTemplate") or {}
    trial_spec = template.get("trialSpec") or {}
    failed = status.get("failedTrialList") or status.get("metricsUnavailableTrialList") or []
    kind = KINDS.get(trial_spec.get("kind", ""))
    if failed and kind is not None and kind.trial is not None:
        job = {**trial_spec, "metadata": {**(trial_spec.get("metadata") or {}), "name": failed[-1]}}
        ref = kind.primary_pod(job)
        return dataclasses.replace(ref, container=template.get("primaryContainerName") or ref.container)
    selector = f"{KATIB_SUGGESTION_LABEL}={obj['metadata']['name']}"
    return PodRef(name=None, selector=selector, container=KATIB_SUGGESTION_CONTAINER)


def _katib_kind(
    kind: str,
    phase: Callable[[dict], Phase],
    describe: Callable[[dict], str],
    primary_pod: Callable[[dict], PodRef],
) -> ResourceKind:
    """A Katib v1beta1 kind: the Experiment, or the Trials it owns."""
    return ResourceKind(
        kind=kind,
        group="kubeflow.org",
        version="v1beta1",
        plural=f"{kind.lower()}s",
        phase=phase,
        describe=describe,
        primary_pod=primary_pod,
        provided_by="Katib v0.19",
    )


EXPERIMENT = _katib_kind("Experiment", experiment_phase, describe_experiment, _experiment_primary_pod)

# Trial outcomes in the order Katib's experiment controller tests them (a Trial has one True).
TRIAL_FAILED_CONDITIONS = ("Killed", "Failed", "MetricsUnavailable")
TRIAL_FINISHED_CONDITIONS = ("Succeeded", "EarlyStopped")


def trial_phase(obj: dict) -> Phase:
    """A Trial: Succeeded (or early stopped) / Failed (or killed, or no metrics) / Running."""
    true = _true_conditions(obj)
    if true & set(TRIAL_FAILED_CONDITIONS):
        return Phase.FAILED
    if true & set(TRIAL_FINISHED_CONDITIONS):
        return Phase.SUCCEEDED
    if "Running" in true:
        return Phase.RUNNING
    return Phase.PENDING


def _trial_primary_pod(obj: dict) -> PodRef:
    """The primary pod of the trial's job (``spec.runSpec``, named after the trial); for a job
    kfstack does not know, the pods Katib labels with the trial's name."""
    spec = obj.get("spec") or {}
    run_spec = spec.get("runSpec") or {}
    container = spec.get("primaryContainerName")
    kind = KINDS.get(run_spec.get("kind", ""))
    if kind is None or kind.api_version != run_spec.get("apiVersion"):
        selector = f"{KATIB_TRIAL_LABEL}={obj['metadata']['name']}"
        return PodRef(name=None, selector=selector, container=container or "")
    ref = kind.primary_pod(run_spec)
    return dataclasses.replace(ref, container=container or ref.container)


# Read by the tuning step (its trials), never launched, and not in KINDS: the run cleanup must not
# delete Trials one by one (deleting the Experiment deletes them and their jobs).
TRIAL = _katib_kind("Trial", trial_phase, describe_training_job, _trial_primary_pod)

# --- long-lived services -----------------------------------------------------------------------


def service_phase(obj: dict) -> Phase:
    """Ready at the generation last applied: ``status.observedGeneration`` has caught up with
    ``metadata.generation`` and the ``Ready`` condition is True. A service never finishes by
    itself and has no terminal failure; until it is ready it is Pending (or Running once its
    controller has seen the current generation).

    For a kind whose ``observedGeneration`` is its own. Not an InferenceService: KServe copies
    that field from the Knative Service or the Deployment it manages
    (:func:`inference_service_phase`)."""
    status = obj.get("status") or {}
    generation = (obj.get("metadata") or {}).get("generation")
    observed = status.get("observedGeneration")
    if generation is not None and (observed is None or observed < generation):
        return Phase.PENDING
    ready = next((c for c in _conditions(obj) if c.get("type") == "Ready"), None)
    if ready is not None and ready.get("status") == "True":
        return Phase.SUCCEEDED
    return Phase.RUNNING


# KServe InferenceService. Its ``status.observedGeneration`` is not the InferenceService's own:
# KServe copies it from the Knative Service (Serverless) or from the predictor Deployment
# (Standard) (v0.20 ``inference_service_status.go``), so "Ready at the generation just applied"
# cannot be read from it. What the launcher waits for instead is a status that shows the spec
# just applied: the traffic split it asks for (Serverless) or exactly its canaries, ready, with
# CanaryPredictorReady True while there are canaries (Standard), and the Ready condition True.
KSERVE_MODE_ANNOTATION = "serving.kserve.io/deploymentMode"
SERVERLESS = "serverless"
STANDARD = "standard"


def kserve_mode(obj: dict) -> str:
    """:data:`STANDARD` for Standard/RawDeployment, else :data:`SERVERLESS` (Knative)."""
    value = ((obj.get("metadata") or {}).get("annotations") or {}).get(KSERVE_MODE_ANNOTATION, "")
    return STANDARD if value in ("Standard", "RawDeployment") else SERVERLESS


def _predictor_status(obj: dict) -> dict:
    return (((obj.get("status") or {}).get("components") or {}).get("predictor")) or {}


def _serverless_split_applied(obj: dict) -> bool:
    """Knative's traffic is what ``canaryTrafficPercent`` asks for: the latest revision at C%
    (100 without the field) and the previously rolled-out one at the rest."""
    predictor = obj["spec"]["predictor"]
    wanted = predictor.get("canaryTrafficPercent")
    status = _predictor_status(obj)
    traffic = status.get("traffic") or []
    # Knative routes "latest" to the latest *ready* revision: while the newest one is not ready,
    # the split would read as applied with the old revision on both sides.
    newest, ready = status.get("latestCreatedRevision"), status.get("latestReadyRevision")
    if newest != ready or any(
        t.get("revisionName") not in (None, ready) for t in traffic if t.get("latestRevision")
    ):
        return False
    latest = sum(t.get("percent") or 0 for t in traffic if t.get("latestRevision"))
    previous = sum(t.get("percent") or 0 for t in traffic if not t.get("latestRevision"))
    if wanted is None or wanted >= 100:
        return latest == 100 and previous == 0
    # KServe ignores the field until a revision has been rolled out (the first rollout).
    if not status.get("latestRolledoutRevision"):
        return latest == 100
    return latest == wanted and previous == 100 - wanted


# Standard mode's condition over the canaries (KServe 0.20; present while spec.canary is not
# empty, True once every canary's Deployment has an available replica).
CANARY_READY_CONDITION = "CanaryPredictorReady"


def _standard_canaries_applied(obj: dict) -> bool:
    """The status lists exactly the spec's canaries, each ready at its traffic share, and with
    canaries, :data:`CANARY_READY_CONDITION` is True."""
    wanted = {c["predictor"].get("name"): c.get("trafficPercent", 0) for c in obj["spec"].get("canary") or []}
    if wanted and CANARY_READY_CONDITION not in _true_conditions(obj):
        return False
    statuses = (obj.get("status") or {}).get("canaryStatuses") or []
    seen = {c.get("name"): (c.get("trafficPercent", 0), c.get("ready")) for c in statuses}
    return set(seen) == set(wanted) and all(seen[n] == (p, True) for n, p in wanted.items())


def inference_service_phase(obj: dict) -> Phase:
    """Succeeded once the status shows the spec just applied and Ready is True (see above);
    Running while the controller works on it; Pending before it has any status."""
    if not obj.get("status"):
        return Phase.PENDING
    ready = "Ready" in _true_conditions(obj)
    applied = (
        _standard_canaries_applied(obj) if kserve_mode(obj) == STANDARD else _serverless_split_applied(obj)
    )
    return Phase.SUCCEEDED if ready and applied else Phase.RUNNING


def describe_inference_service(obj: dict) -> str:
    lines = [describe_training_job(obj)]
    traffic = _predictor_status(obj).get("traffic") or []
    if traffic:
        lines.append(
            "traffic: "
            + ", ".join(
                f"{t.get('revisionName') or t.get('tag') or '?'}"
                f"{' (latest)' if t.get('latestRevision') else ''}={t.get('percent')}%"
                for t in traffic
            )
        )
    canaries = (obj.get("status") or {}).get("canaryStatuses") or []
    if canaries:
        lines.append(
            "canaries: "
            + ", ".join(
                f"{c.get('name')} ready={c.get('ready')} {c.get('trafficPercent')}%" for c in canaries
            )
        )
    return "\n".join(lines)


def _predictor_pod(obj: dict) -> PodRef:
    # KServe labels every predictor pod with its InferenceService's name.
    return PodRef(
        name=None,
        selector=f"serving.kserve.io/inferenceservice={obj['metadata']['name']}",
        container="kserve-container",
    )


INFERENCE_SERVICE = ResourceKind(
    kind="InferenceService",
    group="serving.kserve.io",
    version="v1beta1",
    plural="inferenceservices",
    phase=inference_service_phase,
    describe=describe_inference_service,
    primary_pod=_predictor_pod,
    lifecycle=Lifecycle.SERVICE,
    provided_by="KServe 0.20 or later",
)


KINDS = {k.kind: k for k in (PYTORCHJOB, TFJOB, TRAINJOB, SPARK_APPLICATION, EXPERIMENT, INFERENCE_SERVICE)}


def kind_of(obj: dict, kinds: dict[str, ResourceKind] | None = None) -> ResourceKind:
    """The :class:`ResourceKind` of a manifest, by its ``apiVersion`` and ``kind``.

    Raises:
        KeyError: kfstack does not launch that kind.
    """
    kind = (kinds or KINDS).get(obj.get("kind", ""))
    if kind is None or kind.api_version != obj.get("apiVersion"):
        raise KeyError(f"kfstack launches no {obj.get('apiVersion')} {obj.get('kind')}")
    return kind
