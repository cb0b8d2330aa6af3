"""A model's rollout, the same on both platforms: first deployment, or canary, analysis, then
promotion or rollback.

:func:`roll_out` is the whole decision; a :class:`Rollout` is one platform's hands -- KServe's
InferenceService on a cluster (:mod:`.kserve_rollout`), two model servers on loopback and the
local registry on this machine (:mod:`.local_rollout`):

1. Nothing in production yet: the model is deployed at 100%, answers one batch of holdout
   records (a model that cannot serve fails the step), and becomes production. Decision
   ``first``.
2. The model is already the one in production (a resumed run): nothing changes. ``unchanged``.
3. Otherwise the model is deployed as a canary beside the stable one, the labelled holdout is
   replayed to both (:func:`kfstack.serving.canary.analyse`), and by the decision rule the
   canary is promoted (``promote``: it serves 100%, production is the new version) or rolled
   back (``rollback``: the previous model serves 100%, as before).

A rollout that does not reach its decision -- the canary never became ready, the analysis
failed, SIGTERM arrived (a cancelled run) -- rolls its canary back before the error goes on: a
half-finished canary never stays behind. (A process killed outright cannot; on a cluster the
run's exit handler then rolls back, :func:`kfstack.serving.kserve_rollout.roll_back_run_canaries`;
locally production is only written by a promotion, and the runner stops the servers.) A first
deployment becomes production only once it answered (:meth:`Rollout.promote`); one that did not
is deployed first again by the next rollout.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import sys
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from kfstack import progress
from kfstack.cancellation import sigterm_raises
from kfstack.evaluation.task_metrics import BINARY
from kfstack.platforms import StageResult
from kfstack.serving.canary import PROMOTE, ROLLBACK, CanaryReport, CanaryThresholds, Endpoint, analyse, probe

logger = logging.getLogger(__name__)

FIRST = "first"
UNCHANGED = "unchanged"
DECISIONS = (FIRST, UNCHANGED, PROMOTE, ROLLBACK)
# The deploy step's decision when it deploys nothing (deploy=false).
SKIPPED = "skipped"


class Rollout(Protocol):
    """One platform's side of rolling out one model version.

    Attributes:
        mode: Where it serves: ``local``, or KServe's ``serverless`` / ``standard``.
    """

    mode: str

    def production_version(self) -> str | None:
        """The version serving now; None before the first rollout."""
        ...

    def deploy_first(self) -> Endpoint:
        """Serves the model at 100% and waits until it is ready; its endpoint."""
        ...

    def deploy_canary(self) -> tuple[Endpoint, Endpoint]:
        """Serves the model as a canary beside production; waits until both are ready; the
        stable and canary endpoints."""
        ...

    def promote(self, details: Mapping[str, Any]) -> None:
        """Makes the deployed model production (after a first deployment, or a good canary)."""
        ...

    def roll_back(self, details: Mapping[str, Any], settle: bool = True) -> None:
        """Leaves the previous model serving 100%; safe whatever state :meth:`deploy_canary`
        reached (also none). ``settle``: wait until the platform shows it (False after an
        error: a canary that never became ready may keep the service from reading as settled)."""
        ...

    def reference(self) -> dict[str, Any]:
        """What serves, to find it again (the InferenceService's coordinates, the local servers)."""
        ...


@dataclasses.dataclass(frozen=True)
class RolloutOutcome:
    """What a rollout decided and why.

    Attributes:
        mode: The platform's serving mode (:attr:`Rollout.mode`).
        decision: One of :data:`DECISIONS`.
        model_version: The version this run rolled out.
        previous_version: What served before (None on a first rollout).
        production_version: What serves now.
        report: The canary analysis (None without a canary).
    """

    mode: str
    decision: str
    model_version: str
    previous_version: str | None
    production_version: str
    report: CanaryReport | None = None

    def metrics(self) -> dict[str, float]:
        """Scalars for the step's ``Metrics`` artifact: the decision as flags, the compared figures."""
        flags = {f"decision_{decision}": float(self.decision == decision) for decision in DECISIONS}
        return {**flags, **(self.report.metrics() if self.report else {})}

    def summary(self) -> dict[str, Any]:
        """A run summary's ``serving`` entry."""
        analysis = self.report.summary() if self.report else {"figures": {}, "failed_checks": []}
        return {
            "mode": self.mode,
            "decision": self.decision,
            "model_version": self.model_version,
            "previous_version": self.previous_version,
            "production_version": self.production_version,
            "figures": analysis["figures"],
            "failed_checks": analysis["failed_checks"],
            "cautions": analysis.get("cautions", []),
        }

    def markdown(self) -> str:
        headline = {
            FIRST: f"First deployment: model {self.model_version} serves 100% (nothing was in production).",
            UNCHANGED: f"Model {self.model_version} already serves 100%: nothing was changed.",
            PROMOTE: (
                f"Canary {self.model_version} promoted: it serves 100%, replacing {self.previous_version}."
            ),
            ROLLBACK: (
                f"Canary {self.model_version} rolled back: {self.previous_version} serves 100%, as before."
            ),
        }[self.decision]
        text = f"# Deployment ({self.mode}): {self.decision}\n\n{headline}\n"
        if self.report is not None:
            text += "\n" + self.report.markdown().replace("# Canary analysis", "## Canary analysis", 1)
        return text


@dataclasses.dataclass(frozen=True)
class Holdout:
    """The labelled records a rollout replays (a deployment reads them from its holdout dataset,
    :func:`kfstack.serving.scoring.read_labelled`)."""

    records: Sequence[Any]  # what one request carries per row: a record, or a row of numbers
    labels: Sequence[Any]


def roll_out(
    rollout: Rollout,
    version: str,
    holdout: Holdout,
    thresholds: CanaryThresholds,
    batch_size: int,
    task: str = BINARY,
) -> RolloutOutcome:
    """Deploys ``version`` through ``rollout`` as the module docstring describes; ``task`` says
    how the canary's predictions are judged (:mod:`kfstack.serving.canary`).

    Raises:
        DeploymentFailedError: A first deployment did not serve.
        ResourceFailedError, RunFailedError: The platform failed to deploy (the canary was
            rolled back).
        CancelledError: SIGTERM arrived (the canary was rolled back).
    """
    previous = rollout.production_version()

    def outcome(decision: str, production: str, report: CanaryReport | None = None) -> RolloutOutcome:
        return RolloutOutcome(rollout.mode, decision, version, previous, production, report)

    if previous == version:
        return outcome(UNCHANGED, version)
    with sigterm_raises():
        if previous is None:
            progress.report("deploy: first rollout")
            endpoint = rollout.deploy_first()
            probe(endpoint, holdout.records[:batch_size])
            rollout.promote({"decision": FIRST})
            return outcome(FIRST, version)
        try:
            progress.report(f"deploy: canary beside {previous}", 1, 3)
            stable, canary = rollout.deploy_canary()
            progress.report(f"deploy: analysing ({len(holdout.records)} records)", 2, 3)
            report = analyse(stable, canary, holdout.records, holdout.labels, thresholds, batch_size, task)
        except BaseException as err:
            _roll_back_after(rollout, err)
            raise
        for caution in report.cautions():
            print(f"deploy: warning: {caution}", file=sys.stderr)
        progress.report(f"deploy: {report.decision}", 3, 3)
        if report.decision == PROMOTE:
            rollout.promote(report.summary())
            return outcome(PROMOTE, version, report)
        rollout.roll_back(report.summary())
        return outcome(ROLLBACK, previous, report)


def _roll_back_after(rollout: Rollout, err: BaseException) -> None:
    """Rolls the canary back after ``err`` cut the rollout short; a failing rollback is logged,
    so that ``err`` -- the reason -- is what the step reports."""
    reason = f"the rollout did not finish: {type(err).__name__}: {err}"
    logger.warning("rolling the canary back: %s", reason)
    try:
        rollout.roll_back({"decision": ROLLBACK, "reason": reason}, settle=False)
    except Exception:
        logger.exception("rolling the canary back failed too")


SERVING_METRICS = "serving_metrics"
DEPLOYMENT_REPORT = "deployment_report"


def deployment_result(rollout: Rollout, outcome: RolloutOutcome) -> StageResult:
    """What a deployment step reports: the decision and figures, where it serves, the report."""
    return StageResult(
        metrics={SERVING_METRICS: outcome.metrics()},
        reference={**rollout.reference(), "model_version": outcome.model_version},
        outputs={
            "decision": outcome.decision,
            "production_version": outcome.production_version,
            "serving_summary": json.dumps(outcome.summary()),
        },
        documents={DEPLOYMENT_REPORT: outcome.markdown()},
    )


def skipped_deployment() -> StageResult:
    """What a deployment step reports with ``deploy=false``."""
    summary = {"mode": None, "decision": SKIPPED}
    return StageResult(
        metrics={SERVING_METRICS: {}},
        reference={"kind": "none", "deploy": False},
        outputs={"decision": SKIPPED, "production_version": "", "serving_summary": json.dumps(summary)},
        documents={
            DEPLOYMENT_REPORT: "# Deployment skipped\n\n`deploy=false`: the model was not deployed.\n"
        },
    )
