"""What the receiver does with each alert of a notification, whichever platform retrains: one
decision per alert -- started, skipped or refused -- logged as one JSON line.

The rules (the same on a cluster and embedded; the platform supplies the schedule and the runs):

- only a firing ``KfstackLiveDrift`` alert can start anything: a resolved one, or another alert
  routed here by mistake, is skipped;
- the alert's ``namespace`` and ``inference_service`` lead to the one retraining schedule
  recorded for that model (:class:`Retraining`); none, or several, is a refusal: the receiver
  never guesses which pipeline retrains a model;
- a firing that already started a run is a duplicate (Alertmanager repeats a notification every
  ``repeat_interval`` while an alert fires, and each Alertmanager of an HA pair may send it):
  skipped, however long ago that run was;
- a run of that model that is still running -- one of the runs the platform lists for the model
  (:meth:`Schedule.history`: on a cluster the runs of the schedule's pipeline in its namespace,
  whatever their experiment, whoever started them, whose ``serving_name`` is the model's and
  that launch into the alert's namespace) --
  blocks: two retrainings of one model would race for its canary. A run still not ended
  ``stale_after`` (default 24 h) after its start -- stuck pending, a lost pod, a state the
  platform does not know -- no longer blocks, and the decision says so;
- the newest run an alert started, younger than the cooldown, blocks.

The runs are read from the platform at each decision, never from this process's memory, so a
restarted receiver, or a second replica, decides the same.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import logging
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol

from kfstack.app.alert_receiver.notification import RESOLVED, Alert, Notification
from kfstack.errors import KfstackError

DRIFT_ALERT = "KfstackLiveDrift"
NAMESPACE_LABEL = "namespace"
SERVICE_LABEL = "inference_service"
# The annotation the live-drift rule may carry with the value that fired it.
MAX_PSI_ANNOTATION = "max_psi"
TRIGGER_PARAMETER = "trigger"
FORCE_PARAMETER = "force"
SERVING_NAME_PARAMETER = "serving_name"
# A run's trigger starts so when an alert started it (empty: a schedule or a person).
TRIGGER_PREFIX = "alert "
DEFAULT_COOLDOWN = datetime.timedelta(hours=6)
DEFAULT_STALE_AFTER = datetime.timedelta(hours=24)

STARTED = "started"
SKIPPED = "skipped"
REFUSED = "refused"

log = logging.getLogger(__name__)


# A run whose start the platform does not say: older than any cooldown or --stale-after.
NO_TIME = datetime.datetime.min.replace(tzinfo=datetime.UTC)


class Refusal(Exception):
    """The alert cannot lead to a run as things are configured (no schedule for the model, two,
    a pipeline without a ``trigger`` parameter): logged as refused, nothing started."""


@dataclasses.dataclass(frozen=True)
class PastRun:
    """A run of the model's retraining pipeline, as the platform records it.

    Attributes:
        id: Its KFP run id, or its run directory.
        created_at: When it was created (aware, UTC).
        running: It has not ended.
        trigger: Its ``trigger`` parameter ("" when a schedule or a person started it).
    """

    id: str
    created_at: datetime.datetime
    running: bool
    trigger: str

    @property
    def by_alert(self) -> bool:
        return self.trigger.startswith(TRIGGER_PREFIX)


class Schedule(Protocol):
    """The retraining recorded for one model on a platform."""

    @property
    def description(self) -> str:
        """What it is, for the log line (the recurring run's name and id, the pipeline)."""
        ...

    def history(self) -> list[PastRun]:
        """The runs of its pipeline for this model."""
        ...

    def start(self, trigger: str) -> str:
        """Starts one run with the schedule's parameters and ``trigger``; returns its id."""
        ...


class Retraining(Protocol):
    """Where a platform keeps its schedules and runs."""

    def schedule_for(self, namespace: str, service: str) -> AbstractContextManager[Schedule]:
        """The schedule recorded for InferenceService ``service`` of ``namespace``.

        Raises:
            Refusal: None, or several.
        """
        ...


@dataclasses.dataclass(frozen=True)
class Decision:
    outcome: str
    reason: str
    alert: Alert
    run: str = ""
    schedule: str = ""

    def record(self) -> dict[str, Any]:
        """The log line's fields (and the HTTP answer's entry for this alert)."""
        fields: dict[str, Any] = {
            "decision": self.outcome,
            "reason": self.reason,
            "alert": self.alert.name,
            "status": self.alert.status,
            "namespace": self.alert.labels.get(NAMESPACE_LABEL, ""),
            "inference_service": self.alert.labels.get(SERVICE_LABEL, ""),
            "starts_at": self.alert.starts_at,
            "fingerprint": self.alert.fingerprint,
        }
        if self.schedule:
            fields["schedule"] = self.schedule
        if self.run:
            fields["run"] = self.run
        return fields


def trigger_text(alert: Alert) -> str:
    """The ``trigger`` parameter of a run an alert starts: why, in words a person reads in the
    UI, ending with the firing's key (what :func:`blocking_reason` finds duplicates by)."""
    namespace = alert.labels.get(NAMESPACE_LABEL, "")
    service = alert.labels.get(SERVICE_LABEL, "")
    psi = alert.annotations.get(MAX_PSI_ANNOTATION)
    return (
        f"{TRIGGER_PREFIX}{alert.name} on {namespace}/{service} firing since {alert.starts_at}"
        + (f", max PSI {psi}" if psi else "")
        + f" [{alert.key}]"
    )


def blocking_reason(
    alert: Alert,
    history: list[PastRun],
    now: datetime.datetime,
    cooldown: datetime.timedelta,
    stale_after: datetime.timedelta = DEFAULT_STALE_AFTER,
) -> str | None:
    """Why ``alert`` starts no run given the model's runs (module docstring); None: start one."""
    for run in history:
        if run.by_alert and run.trigger.endswith(f"[{alert.key}]"):
            return f"duplicate: run {run.id} was started for this firing of the alert"
    running = [run for run in history if run.running and now - run.created_at < stale_after]
    if running:
        run = running[0]
        return (
            f"run {run.id} of this model is still running, started {_duration(now - run.created_at)} ago "
            f"(one retraining at a time; it stops blocking {_duration(stale_after)} after its start, "
            f"--stale-after)"
        )
    by_alert = [run for run in history if run.by_alert]
    if by_alert:
        newest = max(by_alert, key=lambda run: run.created_at)
        age = now - newest.created_at
        if age < cooldown:
            return (
                f"cooldown: run {newest.id} was started by an alert {_duration(age)} ago "
                f"(cooldown {_duration(cooldown)})"
            )
    return None


def stale_runs_note(history: list[PastRun], now: datetime.datetime, stale_after: datetime.timedelta) -> str:
    """The runs that would still be running but are past ``stale_after``, for the decision's
    reason ("" when none): they no longer block, and the log says which and why."""
    stale = [run for run in history if run.running and now - run.created_at >= stale_after]
    return "; ".join(
        f"run {run.id} not ended {_age(now, run.created_at)} after its start, past --stale-after "
        f"{_duration(stale_after)}: no longer blocks"
        for run in stale
    )


def _age(now: datetime.datetime, start: datetime.datetime) -> str:
    return "(start unknown)" if start == NO_TIME else _duration(now - start)


def _duration(span: datetime.timedelta) -> str:
    seconds = max(0, int(span.total_seconds()))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s"


def utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class Receiver:
    """Decides on each alert of a notification and starts what it decides to (module docstring).

    Decisions are made one at a time in this process (a lock), so two alerts of one
    notification, or two notifications at once, never both start a run of one model. Nothing
    guards two processes (the platform's list-then-create is not atomic): the Deployment keeps
    one replica, replaced with the Recreate strategy.

    Args:
        retraining: The platform's schedules and runs.
        cooldown: How long after a run an alert started no other alert starts one for that model.
        clock: The current time (aware, UTC).
        stale_after: How long after its start a run not ended still blocks.
    """

    def __init__(
        self,
        retraining: Retraining,
        cooldown: datetime.timedelta = DEFAULT_COOLDOWN,
        clock: Callable[[], datetime.datetime] = utc_now,
        stale_after: datetime.timedelta = DEFAULT_STALE_AFTER,
    ) -> None:
        self.retraining = retraining
        self.cooldown = cooldown
        self.clock = clock
        self.stale_after = stale_after
        self._lock = threading.Lock()

    def handle(self, notification: Notification) -> list[Decision]:
        """One decision per alert, each logged as it is made.

        Raises:
            KfstackError: The platform failed (the KFP API unreachable): the alerts not decided
                yet are left to Alertmanager's retry (an answer 5xx); those decided are logged.
        """
        decisions = []
        with self._lock:
            for alert in notification.alerts:
                try:
                    decision = self._decide(alert)
                except KfstackError as err:
                    failed = Decision(
                        REFUSED, f"the platform failed, left to Alertmanager's retry: {err}", alert
                    )
                    log.warning(json.dumps(failed.record(), sort_keys=True))
                    raise
                log.info(json.dumps(decision.record(), sort_keys=True))
                decisions.append(decision)
        return decisions

    def _decide(self, alert: Alert) -> Decision:
        if alert.name != DRIFT_ALERT:
            return Decision(SKIPPED, f"not a {DRIFT_ALERT} alert", alert)
        if alert.status == RESOLVED:
            return Decision(SKIPPED, "resolved: a resolved alert starts nothing", alert)
        namespace = alert.labels.get(NAMESPACE_LABEL, "")
        service = alert.labels.get(SERVICE_LABEL, "")
        if not service:
            return Decision(REFUSED, f"the alert has no {SERVICE_LABEL} label", alert)
        try:
            with self.retraining.schedule_for(namespace, service) as schedule:
                history, now = schedule.history(), self.clock()
                reason = blocking_reason(alert, history, now, self.cooldown, self.stale_after)
                note = stale_runs_note(history, now, self.stale_after)
                if reason:
                    return Decision(SKIPPED, _joined(reason, note), alert, schedule=schedule.description)
                run = schedule.start(trigger_text(alert))
                reason = _joined("drift alert firing", note)
                return Decision(STARTED, reason, alert, run=run, schedule=schedule.description)
        except Refusal as refusal:
            return Decision(REFUSED, str(refusal), alert)


def _joined(reason: str, note: str) -> str:
    return f"{reason}; {note}" if note else reason
