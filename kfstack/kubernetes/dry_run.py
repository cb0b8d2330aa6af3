"""Before anything is created: does the cluster's controller release accept each body whole?

A server-side dry run (``dryRun=All`` with ``fieldValidation=Strict``) runs a create through the
cluster's CRD schema and admission webhooks and stores nothing. It needs only the ``create`` the
launch needs anyway (a profile's service account rarely may read CRDs), and unlike API discovery
it tells releases of one group/version apart: Kubeflow Trainer v2.1 and v2.3 both serve
``trainer.kubeflow.org/v1alpha1``, but only v2.3's schema has ``spec.runtimePatches``
(:mod:`.controller_releases`).

:func:`fitted` is what a step runs before its first create, and the run's first task for every
step (:func:`check_launches`):

- the body is accepted: it is created as built;
- a field is refused and the kind has an older form that the cluster accepts (a TrainJob on
  Trainer v2.1: :func:`~.train_job.for_trainer_v2_1`): that form is created, and one log line
  says so and what it leaves out;
- a field is refused with no such form (a Standard-mode InferenceService on KServe 0.16): a
  :class:`~kfstack.errors.ControllerReleaseError` names the field, the feature it serves and the
  release that has it. Nothing is created, so no feature is ever half done.

A Katib Experiment's CRD has no field schema, and Katib creates its trials' jobs without strict
validation: its trial template's job is dry-run as an object of its own kind, and replaced by
that kind's older form where needed.

A dry run the server cannot answer (a webhook that does not support dry runs, a permission, the
server or a webhook failing) is logged and the launch goes on: the create itself, with strict
validation, is the second line. Any other refusal (an invalid value, a webhook's denial) fails
the step before anything is created, with the server's words: its create would be refused the
same way. An older form is chosen only where the server accepts it outright.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from kfstack.errors import ControllerReleaseError, PlatformNotAvailableError
from kfstack.kubernetes import controller_releases, train_job
from kfstack.kubernetes.launcher import Cluster, status_message
from kfstack.kubernetes.resources import EXPERIMENT, KINDS, kind_of
from kfstack.kubernetes.sdk import lazy_module

if TYPE_CHECKING:
    from kubernetes.client import rest
else:
    rest = lazy_module("kubernetes.client.rest")

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class OlderForm:
    """A body as an older release of its controller takes it.

    Attributes:
        controller: Key of :data:`~.controller_releases.CONTROLLERS`.
        release: The release (and older ones back to the oldest supported) this form is for.
        convert: The newest form's body -> this form's (pure).
        leaves_out: What this form cannot carry, said in the log line that chooses it.
    """

    controller: str
    release: str
    convert: Callable[[dict], dict]
    leaves_out: str

    @property
    def name(self) -> str:
        return f"{controller_releases.CONTROLLERS[self.controller].name} {self.release}"


# (API group, kind) -> its older forms, newest first.
OLDER_FORMS: dict[tuple[str, str], tuple[OlderForm, ...]] = {
    ("trainer.kubeflow.org", "TrainJob"): (
        OlderForm("trainer", "v2.1.0", train_job.for_trainer_v2_1, train_job.V2_1_LEAVES_OUT),
    ),
}


# Statuses of a dry run the server could not answer: a permission or a missing API (403, 404),
# too many requests, the server or a webhook failing (5xx).
_UNANSWERED_STATUSES = {403, 404, 429}
# An admission webhook that does not declare sideEffects None refuses every dry run so.
_NO_DRY_RUN = "does not support dry run"


def _unanswered(err: Any) -> bool:
    return err.status in _UNANSWERED_STATUSES or err.status >= 500 or _NO_DRY_RUN in str(err.body or "")


@dataclasses.dataclass(frozen=True)
class _DryRun:
    """What a dry run of one body told: answered or not, and the strict refusal if any."""

    answered: bool
    refusal: ControllerReleaseError | None = None

    @property
    def accepted(self) -> bool:
        return self.answered and self.refusal is None


def _dry_run(cluster: Cluster, body: dict, what: str, only_fields: bool = False) -> _DryRun:
    """A dry run of ``body``: accepted, refused for fields its controller release lacks, or not
    answered.

    Raises:
        PlatformNotAvailableError: The server refused ``body`` for another reason (an invalid
            value, a webhook's denial), unless ``only_fields`` (a Katib trial template, whose
            values are Katib's placeholders until a trial fills them in); nothing was created.
    """
    kind = kind_of(body)
    try:
        cluster.launcher(kind).dry_run(body)
    except ControllerReleaseError as err:
        return _DryRun(answered=True, refusal=err)
    except rest.ApiException as err:
        if only_fields or _unanswered(err):
            logger.warning(
                "dry run of %s not answered (%s %s); its create will be validated instead",
                what,
                err.status,
                err.reason,
            )
            return _DryRun(answered=False)
        raise PlatformNotAvailableError(
            f"the cluster refuses {what} in a dry run: {err.status} {err.reason}: "
            f"{status_message(err)}. Nothing was created."
        ) from err
    return _DryRun(answered=True)


def _fitted_object(stage: str, cluster: Cluster, body: dict, what: str, trial: bool = False) -> dict:
    refusal = _dry_run(cluster, body, what, only_fields=trial).refusal
    if refusal is None:
        return body
    kind = kind_of(body)
    for form in OLDER_FORMS.get((kind.group, kind.kind), ()):
        older = form.convert(body)
        # Only a form the server accepts outright: an unanswered dry run is no evidence.
        if _dry_run(cluster, older, what, only_fields=trial).accepted:
            logger.warning(
                "%s: the cluster's %s does not know %s (%s); creating %s in the %s form: %s",
                stage,
                kind.api_version,
                ", ".join(refusal.fields),
                controller_releases.needs(kind.group, kind.kind, refusal.fields),
                what,
                form.name,
                form.leaves_out,
            )
            return older
    raise ControllerReleaseError(f"{stage}: {what}: {refusal}") from refusal


def fitted(stage: str, cluster: Cluster, body: dict) -> dict:
    """``body``, or the older form of it the cluster's controller accepts (see the module
    docstring).

    Raises:
        ControllerReleaseError: The cluster refuses a field of ``body`` that no older form does
            without; the message names it and the release that has it. Nothing was created.
    """
    kind = kind_of(body)
    name = body["metadata"].get("name", "")
    if kind is EXPERIMENT:
        template = body["spec"]["trialTemplate"]
        trial = template["trialSpec"]
        if trial.get("kind") in KINDS:
            fitted_trial = _fitted_object(
                stage, cluster, _named(trial, name), f"the trial job of {kind.kind} {name}", trial=True
            )
            if fitted_trial["spec"] != trial["spec"]:
                trial = {**trial, "spec": fitted_trial["spec"]}
                body = {**body, "spec": {**body["spec"], "trialTemplate": {**template, "trialSpec": trial}}}
    return _fitted_object(stage, cluster, body, f"{kind.kind} {name}")


def _named(trial: dict, experiment: str) -> dict:
    """A trial template's job with a name to dry-run it under (Katib names each trial's)."""
    return {**trial, "metadata": {**(trial.get("metadata") or {}), "name": experiment}}


def check_launches(stage: str, launches: Iterable[tuple[Cluster, Sequence[dict]]]) -> None:
    """:func:`fitted` of every object a run's steps would create, before the first step starts,
    with one error for all the fields refused.

    Raises:
        ControllerReleaseError: Naming every refused field and the release that has it.
            Nothing was created.
    """
    problems = []
    for cluster, objects in launches:
        for body in objects:
            try:
                fitted(stage, cluster, body)
            except ControllerReleaseError as err:
                problems.append(str(err).removeprefix(f"{stage}: "))
    if problems:
        raise ControllerReleaseError(f"{stage}: {'. '.join(problems)}")
