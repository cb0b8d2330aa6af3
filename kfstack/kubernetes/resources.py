"""The custom resources kfstack launches, and how to read their state.

Each :class:`ResourceKind` knows its API coordinates, its :class:`Lifecycle`, how its
``status`` maps onto a :class:`Phase`, what to say about a failure, and which pod's log explains
it (the *primary* pod: the PyTorchJob master, the TFJob chief or worker 0, the Spark driver).

Two lifecycles (STYLE 17). An **owned batch job** (SparkApplication, PyTorchJob, TFJob; the
Katib Experiment next) belongs to one pipeline run: it is adopted on retry, deleted on timeout
or cancel and by the run's cleanup. A **long-lived service** (KServe's InferenceService) outlives
the run: it is applied, awaited until Ready at the generation just applied, and never deleted
by a timeout, a cancel or the cleanup -- its failure handling is a rollback.
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
class ResourceKind:
    kind: str
    group: str
    version: str
    plural: str
    phase: Callable[[dict], Phase]
    describe: Callable[[dict], str]
    primary_pod: Callable[[dict], PodRef]
    lifecycle: Lifecycle = Lifecycle.BATCH

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"


# --- training-operator jobs (PyTorchJob, TFJob) ----------------------------------------------


def _conditions(obj: dict) -> list[dict]:
    return (obj.get("status") or {}).get("conditions") or []


def training_job_phase(obj: dict) -> Phase:
    """From ``status.conditions``: Succeeded/Failed when one is True, else Running or Pending."""
    true = {c.get("type") for c in _conditions(obj) if c.get("status") == "True"}
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


def _training_primary_pod(container: str) -> Callable[[dict], PodRef]:
    def primary(obj: dict) -> PodRef:
        name = obj["metadata"]["name"]
        spec = obj.get("spec") or {}
        replica_types = set(spec.get("pytorchReplicaSpecs") or spec.get("tfReplicaSpecs") or {})
        # The replica that owns the job's outcome, in the operator's lower-case label values.
        role = next((r for r in ("Master", "Chief") if r in replica_types), "Worker").lower()
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
    )


PYTORCHJOB = _training_operator_kind("PyTorchJob", "pytorch")
TFJOB = _training_operator_kind("TFJob", "tensorflow")


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
)

# --- long-lived services -----------------------------------------------------------------------


def service_phase(obj: dict) -> Phase:
    """Ready at the generation last applied: ``status.observedGeneration`` has caught up with
    ``metadata.generation`` and the ``Ready`` condition is True. A service never finishes by
    itself and has no terminal failure; until it is ready it is Pending (or Running once its
    controller has seen the current generation)."""
    status = obj.get("status") or {}
    generation = (obj.get("metadata") or {}).get("generation")
    observed = status.get("observedGeneration")
    if generation is not None and (observed is None or observed < generation):
        return Phase.PENDING
    ready = next((c for c in _conditions(obj) if c.get("type") == "Ready"), None)
    if ready is not None and ready.get("status") == "True":
        return Phase.SUCCEEDED
    return Phase.RUNNING


KINDS = {k.kind: k for k in (PYTORCHJOB, TFJOB, SPARK_APPLICATION)}


def kind_of(obj: dict, kinds: dict[str, ResourceKind] | None = None) -> ResourceKind:
    """The :class:`ResourceKind` of a manifest, by its ``apiVersion`` and ``kind``.

    Raises:
        KeyError: kfstack does not launch that kind.
    """
    kind = (kinds or KINDS).get(obj.get("kind", ""))
    if kind is None or kind.api_version != obj.get("apiVersion"):
        raise KeyError(f"kfstack launches no {obj.get('apiVersion')} {obj.get('kind')}")
    return kind
