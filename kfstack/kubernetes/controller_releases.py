"""Which releases of each controller kfstack supports, and which fields need a newer one.

kfstack renders one body per kind, for the newest release of its controller. The Kubeflow
platform releases ship older controllers (Kubeflow 1.11 and 26.03 install Kubeflow Trainer
v2.1.0 and KServe 0.15.2 / 0.16.0), and an API server that does not know a field of a custom
resource prunes it with a warning and creates the rest: a TrainJob whose ``spec.runtimePatches``
a Trainer v2.1 cluster dropped would run off its node pool and with no deadline, and nothing
would say so. So every create and update asks for strict field validation
(``fieldValidation=Strict``: an unknown field is refused, 400, naming it), and before a step
creates anything a server-side dry run (``dryRun=All``, same validation, nothing stored) tells
whether the cluster's CRD knows every field of the body (:mod:`.dry_run`).

The release of an SDK model package (``kubeflow-trainer-api``, ``kserve``) is not the
controller's: the cluster's CRD decides what it accepts, and only the API server can tell it.
API discovery names the group/version only (Trainer v2.1 and v2.3 both serve
``trainer.kubeflow.org/v1alpha1``), and a profile's service account may rarely read CRDs; a
dry run needs only the ``create`` a launch needs anyway.

:data:`CONTROLLERS` states, per controller, the oldest and newest release kfstack supports (the
oldest: what the oldest supported Kubeflow platform release installs); :data:`FIELDS` states,
for each field kfstack may set that the oldest supported release lacks, the release that
introduced it and the kfstack feature that needs it. docs/kubernetes.md shows both as a table,
and a test holds that table to these.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable


@dataclasses.dataclass(frozen=True)
class Controller:
    """A controller whose custom resources kfstack creates.

    Attributes:
        name: As its project names it (``Kubeflow Trainer``).
        oldest: The oldest release kfstack supports: what Kubeflow 1.11, the older of the two
            newest Kubeflow platform releases, installs (or the oldest release whose schema
            accepts kfstack's bodies, where no Kubeflow release ships the controller).
        newest: The newest release kfstack is validated against.
        kinds: ``(API group, kind)`` of the resources of it that kfstack creates or ships.
        learned: How kfstack finds out what the cluster's release accepts.
    """

    name: str
    oldest: str
    newest: str
    kinds: tuple[tuple[str, str], ...]
    learned: str


@dataclasses.dataclass(frozen=True)
class FieldRelease:
    """A field kfstack may set that releases before ``release`` do not know.

    Attributes:
        group, kind: The resource's API group and kind.
        path: The field, dotted from the object's root (``spec.runtimePatches``); it covers
            everything below it.
        controller: Key of :data:`CONTROLLERS`.
        release: The first release of the controller that knows the field.
        feature: What kfstack uses the field for, in a user's words.
    """

    group: str
    kind: str
    path: str
    controller: str
    release: str
    feature: str

    @property
    def needs(self) -> str:
        """``Kubeflow Trainer v2.2.0 or newer``."""
        return f"{CONTROLLERS[self.controller].name} {self.release} or newer"


DRY_RUN = "a server-side dry run of each body (dryRun=All, fieldValidation=Strict) before it is created"
CONTROLLERS: dict[str, Controller] = {
    "kfp": Controller(
        "Kubeflow Pipelines",
        "2.15.0",
        "2.17.0",
        (("kubeflow.org", "ScheduledWorkflow"),),
        "nothing to learn: kfstack creates runs and schedules through the KFP API, not objects "
        "(the pipeline spec is what SDK 2.17 compiles; no 2.15 or 2.16 server runs in the tests)",
    ),
    "trainer": Controller(
        "Kubeflow Trainer",
        "v2.1.0",
        "v2.3.0",
        (("trainer.kubeflow.org", "TrainJob"), ("trainer.kubeflow.org", "ClusterTrainingRuntime")),
        DRY_RUN + "; a refused spec.runtimePatches means v2.1: the v2.1 form is created",
    ),
    "training-operator": Controller(
        "Kubeflow training-operator",
        "v1.9.2",
        "v1.9.4",
        (("kubeflow.org", "PyTorchJob"), ("kubeflow.org", "TFJob")),
        "API discovery (kubeflow.org/v1); every supported release accepts the same bodies",
    ),
    "katib": Controller(
        "Katib",
        "v0.19.0",
        "v0.19.0",
        (("kubeflow.org", "Experiment"),),
        "API discovery (kubeflow.org/v1beta1); its CRD has no field schema: the trial job's "
        "body is dry-run as its own kind's",
    ),
    "kserve": Controller(
        "KServe",
        "v0.15.2",
        "v0.20.0",
        (
            ("serving.kserve.io", "InferenceService"),
            ("serving.kserve.io", "ServingRuntime"),
            ("serving.kserve.io", "ClusterServingRuntime"),
        ),
        DRY_RUN + "; a field it refuses is named with the release that has it",
    ),
    "spark-operator": Controller(
        "Spark operator",
        "v2.4.0",
        "v2.5.2",
        (("sparkoperator.k8s.io", "SparkApplication"),),
        "API discovery (sparkoperator.k8s.io/v1beta2); every supported release has the same CRD",
    ),
    "kueue": Controller(
        "Kueue",
        "v0.19.2",
        "v0.19.2",
        (("kueue.x-k8s.io", "LocalQueue"), ("kueue.x-k8s.io", "ClusterQueue")),
        "no Kubeflow release ships it: install the release in manifests/README.md",
    ),
}

FIELDS: tuple[FieldRelease, ...] = (
    # Trainer v2.2 replaced spec.podTemplateOverrides by spec.runtimePatches and added the
    # deadline (trainer-v2 v2.1.0's TrainJob CRD has neither).
    FieldRelease(
        "trainer.kubeflow.org",
        "TrainJob",
        "spec.runtimePatches",
        "trainer",
        "v2.2.0",
        "node-pool placement, pod security and labels through runtime patches",
    ),
    FieldRelease(
        "trainer.kubeflow.org",
        "TrainJob",
        "spec.activeDeadlineSeconds",
        "trainer",
        "v2.2.0",
        "a deadline on the TrainJob itself",
    ),
    # KServe 0.16 added credentials to an external autoscaling metric (v0.15.2's has none).
    FieldRelease(
        "serving.kserve.io",
        "InferenceService",
        "spec.predictor.autoScaling.metrics.external.authenticationRef",
        "kserve",
        "v0.16.0",
        "KEDA's credentials for Prometheus (serving_keda_authentication)",
    ),
    # KServe 0.20 added the Standard (RawDeployment) mode's named predictor and canaries
    # (kserve v0.16.0's InferenceService CRD has neither).
    FieldRelease(
        "serving.kserve.io",
        "InferenceService",
        "spec.canary",
        "kserve",
        "v0.20.0",
        "a Standard-mode canary (serving_mode=standard)",
    ),
    FieldRelease(
        "serving.kserve.io",
        "InferenceService",
        "spec.predictor.name",
        "kserve",
        "v0.20.0",
        "Standard mode's named predictor (serving_mode=standard)",
    ),
)

# What the API server says when strict field validation refuses a body (apimachinery's
# runtime.NewStrictDecodingError, wrapped in a 400 BadRequest Status): ``TrainJob in version
# "v1alpha1" cannot be handled as a TrainJob: strict decoding error: unknown field
# "spec.runtimePatches", unknown field "spec.activeDeadlineSeconds"``. List items are indexed
# (``spec.template.spec.containers[1].ports[0].x``).
STRICT_DECODING = "strict decoding error"
_UNKNOWN_FIELD = re.compile(r'unknown field "([^"]+)"')
_INDEX = re.compile(r"\[\d+\]")


def unknown_fields(message: str) -> list[str]:
    """The fields a strict-validation refusal names, in its order; none when ``message`` is not
    one (another 400, a webhook's refusal)."""
    if STRICT_DECODING not in message:
        return []
    return _UNKNOWN_FIELD.findall(message)


def field_release(group: str, kind: str, path: str) -> FieldRelease | None:
    """The entry of :data:`FIELDS` that covers ``path`` of ``group``/``kind`` (list indices
    ignored), the most specific one; None for a field no supported release lacks."""
    bare = _INDEX.sub("", path).lstrip(".")
    found = [
        entry
        for entry in FIELDS
        if (entry.group, entry.kind) == (group, kind)
        and (bare == entry.path or bare.startswith(entry.path + "."))
    ]
    return max(found, key=lambda entry: len(entry.path), default=None)


def controller_of(group: str, kind: str) -> Controller | None:
    for controller in CONTROLLERS.values():
        if (group, kind) in controller.kinds:
            return controller
    return None


def explain(group: str, kind: str, fields: Iterable[str]) -> str:
    """A sentence per refused field: what kfstack uses it for and the release that has it."""
    parts = []
    for path in fields:
        entry = field_release(group, kind, path)
        if entry is not None:
            parts.append(f"{path} ({entry.feature}) needs {entry.needs}")
        else:
            controller = controller_of(group, kind)
            newest = (
                f"{controller.name} {controller.newest}" if controller else "its controller's newest release"
            )
            parts.append(f"{path} is not known to this cluster's CRD (kfstack is validated against {newest})")
    return "; ".join(parts)


def needs(group: str, kind: str, fields: Iterable[str]) -> str:
    """The releases ``fields`` need, each once (``Kubeflow Trainer v2.2.0 or newer``)."""
    releases = []
    for path in fields:
        entry = field_release(group, kind, path)
        need = entry.needs if entry is not None else "a newer release"
        if need not in releases:
            releases.append(need)
    return ", ".join(releases)
