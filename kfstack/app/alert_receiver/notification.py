"""Alertmanager's webhook notification, read strictly: what the receiver acts on, or an error
naming what is wrong (answered 400, nothing started).

The body is Alertmanager 0.25's ``notify/webhook/webhook.go`` ``Message``: ``version`` "4",
``groupKey``, ``truncatedAlerts`` and the embedded ``template.Data`` of ``template/template.go``
(``receiver``, ``status``, ``alerts``, ``groupLabels``, ``commonLabels``,
``commonAnnotations``, ``externalURL``); each alert has ``status``, ``labels``,
``annotations``, ``startsAt``, ``endsAt``, ``generatorURL`` and ``fingerprint``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from kfstack.errors import BadInputError

WEBHOOK_VERSION = "4"
FIRING = "firing"
RESOLVED = "resolved"
_STATUSES = (FIRING, RESOLVED)


class MalformedNotification(BadInputError):
    """The body is not an Alertmanager webhook notification (version 4)."""


@dataclasses.dataclass(frozen=True)
class Alert:
    """One alert of a notification.

    Attributes:
        status: ``firing`` or ``resolved``.
        labels: Its labels (``alertname``, ``namespace``, ``inference_service``, ...).
        annotations: Its annotations (``summary``, ``runbook_url``, ``max_psi`` when the rule
            writes one).
        starts_at: When it started firing (RFC 3339, as Alertmanager writes it).
        fingerprint: Alertmanager's hash of its labels: with ``starts_at``, this firing of it.
    """

    status: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    starts_at: str
    fingerprint: str

    @property
    def name(self) -> str:
        return self.labels.get("alertname", "")

    @property
    def key(self) -> str:
        """This firing of the alert: a notification repeated, or sent again by a second
        Alertmanager of an HA pair, carries the same key."""
        return f"{self.fingerprint}@{self.starts_at}"


@dataclasses.dataclass(frozen=True)
class Notification:
    receiver: str
    status: str
    group_key: str
    alerts: tuple[Alert, ...]


def parse_notification(body: bytes) -> Notification:
    """The notification in ``body``.

    Raises:
        MalformedNotification: Not JSON, not version 4, or a field missing or of the wrong type
            (the message names it).
    """
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as err:
        raise MalformedNotification(f"the body is not JSON: {err}") from None
    except RecursionError:
        # A webhook message nests four levels deep; the parser's stack gives out near 1,000.
        raise MalformedNotification("the body is not a webhook message: JSON nested too deeply") from None
    if not isinstance(data, dict):
        raise MalformedNotification("the body is not a JSON object")
    if data.get("version") != WEBHOOK_VERSION:
        raise MalformedNotification(
            f"version: expected {WEBHOOK_VERSION!r} (Alertmanager's webhook message), "
            f"got {data.get('version')!r}"
        )
    status = _string(data, "status", "body")
    if status not in _STATUSES:
        raise MalformedNotification(f"status: expected firing or resolved, got {status!r}")
    alerts = data.get("alerts")
    if not isinstance(alerts, list):
        raise MalformedNotification("alerts: expected a list")
    return Notification(
        receiver=_string(data, "receiver", "body"),
        status=status,
        group_key=_string(data, "groupKey", "body"),
        alerts=tuple(_alert(item, f"alerts[{i}]") for i, item in enumerate(alerts)),
    )


def _alert(item: Any, where: str) -> Alert:
    if not isinstance(item, dict):
        raise MalformedNotification(f"{where}: expected an object")
    status = _string(item, "status", where)
    if status not in _STATUSES:
        raise MalformedNotification(f"{where}.status: expected firing or resolved, got {status!r}")
    return Alert(
        status=status,
        labels=_strings(item, "labels", where),
        annotations=_strings(item, "annotations", where),
        starts_at=_string(item, "startsAt", where),
        fingerprint=_string(item, "fingerprint", where),
    )


def _string(data: dict[str, Any], key: str, where: str) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        raise MalformedNotification(f"{where}.{key}: expected a string, got {value!r}")
    return value


def _strings(data: dict[str, Any], key: str, where: str) -> dict[str, str]:
    value = data.get(key)
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise MalformedNotification(f"{where}.{key}: expected an object of strings, got {value!r}")
    return dict(value)
