"""Automated canary analysis: replay labelled records to stable and canary, compare, decide.

KServe splits traffic but judges nothing; this is the judgement. The same code runs on both
platforms: on a cluster against the stable and canary predictors' in-cluster addresses, on the
embedded platform against two model servers on loopback.

**Replay.** The same records go to both endpoints in the same batches (V1 ``:predict``, one
persistent connection each), alternating which endpoint is asked first so neither always meets a
warmer machine. Every request is timed; a request that fails (transport error, non-200, an answer
that is not one finite probability per record) is an error and its records have no prediction.

**Figures** per endpoint: requests, errors, error rate, p50/p95 latency, AUC on the records'
labels (of the records it answered), and the PSI of the canary's prediction distribution against
the stable's (10 bins at the stable predictions' deciles; empty bins count as 1e-4).

**Decision rule** (:class:`CanaryThresholds`, each a pipeline parameter): the canary is promoted
only when every check holds, otherwise rolled back:

1. ``error rate``: canary error rate <= ``max_error_rate``;
2. ``p95 latency``: canary p95 <= ``max_latency_ratio`` x stable p95 + ``latency_slack_ms`` (the
   slack keeps millisecond jitter on a fast service from reading as a regression);
3. ``prediction shift``: PSI <= ``max_psi`` (0.2 is the customary "significant shift" line; 0:
   not checked, for a model retrained because the data drifted);
4. ``AUC``: canary AUC >= stable AUC - ``max_auc_drop``, both on the records both sides
   answered, so on the same labels (not applicable, and passed, when those hold one class;
   failed when either side answered nothing: there is nothing to compare).
"""

from __future__ import annotations

import dataclasses
import http.client
import json
import math
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from kfstack.errors import DeploymentFailedError, InvalidParameterError
from kfstack.monitoring.drift import SHARE_FLOOR, population_stability
from kfstack.training import metrics

PROMOTE = "promote"
ROLLBACK = "rollback"
PSI_BINS = 10
PSI_FLOOR = SHARE_FLOOR


@dataclasses.dataclass(frozen=True)
class CanaryThresholds:
    """The decision rule's limits (see the module docstring)."""

    max_error_rate: float = 0.01
    max_latency_ratio: float = 2.0
    latency_slack_ms: float = 5.0
    max_psi: float = 0.2
    max_auc_drop: float = 0.01

    def __post_init__(self) -> None:
        problems = []
        if not 0.0 <= self.max_error_rate <= 1.0:
            problems.append(f"canary_max_error_rate={self.max_error_rate} must be in [0, 1]")
        if self.max_latency_ratio < 1.0:
            problems.append(f"canary_max_latency_ratio={self.max_latency_ratio} must be at least 1")
        if self.latency_slack_ms < 0:
            problems.append(f"canary_latency_slack_ms={self.latency_slack_ms} must not be negative")
        if self.max_psi < 0:
            problems.append(f"canary_max_psi={self.max_psi} must not be negative (0: not checked)")
        if not 0.0 <= self.max_auc_drop <= 1.0:
            problems.append(f"canary_max_auc_drop={self.max_auc_drop} must be in [0, 1]")
        if problems:
            raise InvalidParameterError("; ".join(problems))


@dataclasses.dataclass(frozen=True)
class Endpoint:
    """A V1 predict URL (``http://host:port/v1/models/<name>:predict``) and the headers every
    request carries (a ``Host`` for an ingress, an ``Authorization`` for an auth proxy)."""

    name: str
    url: str
    headers: Mapping[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class EndpointFigures:
    """What one endpoint did during the replay."""

    name: str
    requests: int
    errors: int
    p50_ms: float
    p95_ms: float
    auc: float | None  # on the records both endpoints answered (the same labels for both)
    predictions: np.ndarray  # per record; NaN where its request failed
    first_error: str = ""

    @property
    def error_rate(self) -> float:
        return self.errors / self.requests if self.requests else 0.0

    @property
    def answered(self) -> np.ndarray:
        return self.predictions[~np.isnan(self.predictions)]


@dataclasses.dataclass(frozen=True)
class Check:
    name: str
    passed: bool
    value: str
    limit: str


@dataclasses.dataclass
class CanaryReport:
    """Both endpoints' figures, the checks and the decision."""

    stable: EndpointFigures
    canary: EndpointFigures
    psi: float
    checks: list[Check]
    thresholds: CanaryThresholds

    @property
    def decision(self) -> str:
        return PROMOTE if all(check.passed for check in self.checks) else ROLLBACK

    def metrics(self) -> dict[str, float]:
        """Scalars for a KFP ``Metrics`` artifact (undefined AUCs left out)."""
        values: dict[str, float] = {"promoted": float(self.decision == PROMOTE)}
        if math.isfinite(self.psi):  # infinite when a side answered nothing: left out, as AUCs
            values["psi"] = round(self.psi, 6)
        for figures in (self.stable, self.canary):
            prefix = figures.name
            values[f"{prefix}_requests"] = float(figures.requests)
            values[f"{prefix}_error_rate"] = round(figures.error_rate, 6)
            values[f"{prefix}_p50_ms"] = round(figures.p50_ms, 3)
            values[f"{prefix}_p95_ms"] = round(figures.p95_ms, 3)
            if figures.auc is not None:
                values[f"{prefix}_auc"] = round(figures.auc, 6)
        return values

    def summary(self) -> dict[str, Any]:
        """The compared figures as plain data (a run summary's ``serving`` entry)."""
        return {
            "decision": self.decision,
            "figures": self.metrics(),
            "failed_checks": [check.name for check in self.checks if not check.passed],
        }

    def markdown(self) -> str:
        def auc(figures: EndpointFigures) -> str:
            return "undefined" if figures.auc is None else f"{figures.auc:.4f}"

        lines = [
            f"# Canary analysis: **{self.decision}**",
            "",
            "| | stable | canary |",
            "|---|---|---|",
            f"| requests | {self.stable.requests} | {self.canary.requests} |",
            f"| errors | {self.stable.errors} | {self.canary.errors} |",
            f"| error rate | {self.stable.error_rate:.4f} | {self.canary.error_rate:.4f} |",
            f"| p50 latency (ms) | {self.stable.p50_ms:.2f} | {self.canary.p50_ms:.2f} |",
            f"| p95 latency (ms) | {self.stable.p95_ms:.2f} | {self.canary.p95_ms:.2f} |",
            f"| AUC on the records both answered | {auc(self.stable)} | {auc(self.canary)} |",
            f"| mean prediction | {_mean(self.stable.answered):.4f} | {_mean(self.canary.answered):.4f} |",
            "",
            f"Prediction shift (PSI, canary against stable): {self.psi:.4f}",
            "",
            "| check | value | limit | |",
            "|---|---|---|---|",
        ]
        lines += [
            f"| {c.name} | {c.value} | {c.limit} | {'pass' if c.passed else '**fail**'} |"
            for c in self.checks
        ]
        errors = [f for f in (self.stable, self.canary) if f.first_error]
        if errors:
            lines += ["", *(f"First {f.name} error: `{f.first_error}`" for f in errors)]
        return "\n".join(lines) + "\n"


def _mean(values: np.ndarray) -> float:
    return float(np.mean(values)) if len(values) else math.nan


class _Client:
    """One persistent HTTP connection to an endpoint; reconnects after a failure."""

    def __init__(self, endpoint: Endpoint, timeout: float) -> None:
        self.endpoint = endpoint
        parts = urllib.parse.urlsplit(endpoint.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InvalidParameterError(f"{endpoint.name} endpoint {endpoint.url!r} is not an http(s) URL")
        self._host: str = parts.hostname
        self._port, self._https = parts.port, parts.scheme == "https"
        self._path = parts.path + (f"?{parts.query}" if parts.query else "")
        self._timeout = timeout
        self._connection: http.client.HTTPConnection | None = None

    def _connect(self) -> http.client.HTTPConnection:
        if self._connection is None:
            factory = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
            self._connection = factory(self._host, self._port, timeout=self._timeout)
        return self._connection

    def predict(self, records: Sequence[Mapping[str, Any]]) -> tuple[list[float] | None, float, str]:
        """``(predictions or None, seconds, error message)`` for one request."""
        body = json.dumps({"instances": list(records)}).encode()
        headers = {"content-type": "application/json", **self.endpoint.headers}
        started = time.perf_counter()
        # A kept-alive connection the server has since closed fails before any answer: that is
        # the connection's failure, not the endpoint's, so a reused one is retried once afresh.
        for attempt in (1, 2):
            reused = self._connection is not None
            try:
                connection = self._connect()
                connection.request("POST", self._path, body=body, headers=headers)
                response = connection.getresponse()
                payload = response.read()
                seconds = time.perf_counter() - started
                break
            except (OSError, http.client.HTTPException) as err:
                self.close()
                stale = isinstance(err, ConnectionError | http.client.RemoteDisconnected)
                if not (reused and stale and attempt == 1):
                    return None, time.perf_counter() - started, f"{type(err).__name__}: {err}"
        if response.status != 200:
            # Servers often close the connection after an error (uvicorn does after a 500).
            self.close()
            return None, seconds, f"HTTP {response.status}: {payload[:200].decode(errors='replace')}"
        try:
            predictions = json.loads(payload)["predictions"]
            values = [float(p) for p in predictions]
        except (ValueError, KeyError, TypeError) as err:
            return None, seconds, f"not a V1 prediction response ({err})"
        if len(values) != len(records) or not all(math.isfinite(v) and 0.0 <= v <= 1.0 for v in values):
            return None, seconds, f"{len(values)} answers for {len(records)} records, or not probabilities"
        return values, seconds, ""

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None


def answers(url: str, headers: Mapping[str, str] | None = None, timeout_seconds: float = 5.0) -> bool:
    """Whether ``GET url`` answers 200 (a readiness path): straight, never through a proxy, as
    the replay calls."""
    parts = urllib.parse.urlsplit(url)
    factory = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    connection = factory(parts.hostname or "", parts.port, timeout=timeout_seconds)
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    try:
        connection.request("GET", path, headers=dict(headers or {}))
        return connection.getresponse().status == 200
    except (OSError, http.client.HTTPException):
        return False
    finally:
        connection.close()


def probe(
    endpoint: Endpoint, records: Sequence[Mapping[str, Any]], timeout_seconds: float = 30.0
) -> list[float]:
    """One request of ``records`` to ``endpoint``: a deployment's smoke test.

    Raises:
        DeploymentFailedError: It did not answer with one probability per record.
    """
    client = _Client(endpoint, timeout_seconds)
    try:
        values, _, error = client.predict(records)
    finally:
        client.close()
    if values is None:
        raise DeploymentFailedError(f"{endpoint.name} model at {endpoint.url} did not serve: {error}")
    return values


def replay(
    stable: Endpoint,
    canary: Endpoint,
    records: Sequence[Mapping[str, Any]],
    labels: Sequence[int],
    batch_size: int = 20,
    timeout_seconds: float = 30.0,
) -> tuple[EndpointFigures, EndpointFigures]:
    """Sends ``records`` to both endpoints in batches; returns what each did.

    Raises:
        InvalidParameterError: No records, labels of another length, or a batch size below 1.
    """
    if not records:
        raise InvalidParameterError("canary analysis: no records to replay")
    if len(labels) != len(records):
        raise InvalidParameterError(f"canary analysis: {len(labels)} labels for {len(records)} records")
    if batch_size < 1:
        raise InvalidParameterError(f"canary_batch_size={batch_size} must be at least 1")
    clients = [_Client(stable, timeout_seconds), _Client(canary, timeout_seconds)]
    predictions = [np.full(len(records), np.nan), np.full(len(records), np.nan)]
    latencies: list[list[float]] = [[], []]
    errors = [0, 0]
    first_error = ["", ""]
    try:
        for batch, start in enumerate(range(0, len(records), batch_size)):
            chunk = records[start : start + batch_size]
            order = (0, 1) if batch % 2 == 0 else (1, 0)
            for side in order:
                values, seconds, error = clients[side].predict(chunk)
                latencies[side].append(seconds * 1000.0)
                if values is None:
                    errors[side] += 1
                    first_error[side] = first_error[side] or error
                else:
                    predictions[side][start : start + len(chunk)] = values
    finally:
        for client in clients:
            client.close()
    y = np.asarray(labels, dtype=np.int64)
    # Both AUCs on the same records: those both sides answered. A canary failing a fifth of its
    # requests would otherwise be scored on a different sample than the stable one.
    both = ~np.isnan(predictions[0]) & ~np.isnan(predictions[1])
    return tuple(  # type: ignore[return-value]
        EndpointFigures(
            name=name,
            requests=len(latencies[side]),
            errors=errors[side],
            p50_ms=float(np.percentile(latencies[side], 50)),
            p95_ms=float(np.percentile(latencies[side], 95)),
            auc=_auc(y[both], predictions[side][both]),
            predictions=predictions[side],
            first_error=first_error[side],
        )
        for side, name in enumerate(("stable", "canary"))
    )


def _auc(labels: np.ndarray, predictions: np.ndarray) -> float | None:
    if len(labels) == 0 or not metrics.has_both_classes(labels):
        return None
    return metrics.roc_auc(labels, predictions)


def psi(expected: np.ndarray, actual: np.ndarray, bins: int = PSI_BINS) -> float:
    """Population stability index of ``actual`` against ``expected``, binned at ``expected``'s
    quantiles (empty bins count as :data:`PSI_FLOOR`). Infinite when either side is empty."""
    if len(expected) == 0 or len(actual) == 0:
        return math.inf
    edges = np.unique(np.quantile(expected, np.linspace(0, 1, bins + 1))[1:-1])
    expected_count = np.bincount(np.searchsorted(edges, expected, side="right"), minlength=len(edges) + 1)
    actual_count = np.bincount(np.searchsorted(edges, actual, side="right"), minlength=len(edges) + 1)
    return population_stability(
        (expected_count / len(expected)).tolist(), (actual_count / len(actual)).tolist(), PSI_FLOOR
    )


def judge(stable: EndpointFigures, canary: EndpointFigures, thresholds: CanaryThresholds) -> CanaryReport:
    """The decision rule of the module docstring on two endpoints' figures."""
    t = thresholds
    shift = psi(stable.answered, canary.answered)
    latency_limit = t.max_latency_ratio * stable.p95_ms + t.latency_slack_ms
    checks = [
        Check(
            "error rate",
            canary.error_rate <= t.max_error_rate,
            f"{canary.error_rate:.4f}",
            f"<= {t.max_error_rate}",
        ),
        Check(
            "p95 latency",
            canary.p95_ms <= latency_limit,
            f"{canary.p95_ms:.2f} ms",
            f"<= {t.max_latency_ratio} x {stable.p95_ms:.2f} + {t.latency_slack_ms} = {latency_limit:.2f} ms",
        ),
        Check(
            "prediction shift",
            shift <= t.max_psi or t.max_psi == 0,
            f"PSI {shift:.4f}",
            f"<= {t.max_psi}" if t.max_psi else "not checked (canary_max_psi=0)",
        ),
    ]
    if len(stable.answered) == 0:
        checks.append(Check("AUC", False, "the stable predictor answered nothing", "a comparison"))
    elif len(canary.answered) == 0:
        checks.append(Check("AUC", False, "no predictions", "a comparison"))
    elif stable.auc is None or canary.auc is None:
        checks.append(Check("AUC", True, "not applicable", "the replayed labels hold one class"))
    else:
        floor = stable.auc - t.max_auc_drop
        checks.append(
            Check("AUC", canary.auc >= floor, f"{canary.auc:.4f}", f">= {stable.auc:.4f} - {t.max_auc_drop}")
        )
    return CanaryReport(stable=stable, canary=canary, psi=shift, checks=checks, thresholds=thresholds)


def analyse(
    stable: Endpoint,
    canary: Endpoint,
    records: Sequence[Mapping[str, Any]],
    labels: Sequence[int],
    thresholds: CanaryThresholds,
    batch_size: int = 20,
) -> CanaryReport:
    """:func:`replay` then :func:`judge`."""
    stable_figures, canary_figures = replay(stable, canary, records, labels, batch_size)
    return judge(stable_figures, canary_figures, thresholds)
