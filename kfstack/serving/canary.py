"""Automated canary analysis: replay labelled records to stable and canary, compare, decide.

KServe splits traffic but judges nothing; this is the judgement. The same code runs on both
platforms: on a cluster against the stable and canary predictors' in-cluster addresses, on the
embedded platform against two model servers on loopback.

**Replay.** The same records go to both endpoints in the same batches (in the server's protocol,
:mod:`kfstack.serving.protocols`: V1 ``:predict`` or a V2 tensor; one persistent connection
each), alternating which endpoint is asked first so neither always meets a warmer machine. Every
request is timed; a request that fails (transport error, non-200, an answer that is not one
finite prediction per record) is an error and its records have no prediction.

**Figures** per endpoint: requests, errors, error rate, p50/p95 latency, the task's quality
metric on the records' labels (:data:`kfstack.evaluation.task_metrics.QUALITY_METRIC`: AUC for a
binary model, accuracy for a multiclass one, RMSE for a regression; on the records both sides
answered), and the PSI of the canary's predictions against the stable's: of the score (a binary
model's probability, a regression's value; 10 bins at the stable's deciles) or of the predicted
class's shares (multiclass), by the data drift check's one formula
(:func:`kfstack.monitoring.drift.population_stability`: an empty bin counts as a share of 1e-4).

**Decision rule** (:class:`CanaryThresholds`, each a pipeline parameter): the canary is promoted
only when every check holds, otherwise rolled back:

1. ``error rate``: canary error rate <= ``max_error_rate``;
2. ``p95 latency``: canary p95 <= ``max_latency_ratio`` x stable p95 + ``latency_slack_ms`` (the
   slack keeps millisecond jitter on a fast service from reading as a regression);
3. ``prediction shift``: PSI <= ``max_psi`` (0.2 is the customary "significant shift" line; 0:
   not checked, for a model retrained because the data drifted);
4. ``quality`` (named for the metric: ``AUC``, ``accuracy``, ``RMSE``): the canary's is at most
   ``max_quality_drop`` worse than the stable's -- an AUC or accuracy lower by that much (they
   lie in [0, 1]), an RMSE higher by that share of the stable's (an RMSE has the label's scale,
   so no absolute default would fit every label) -- both on the records both sides answered, so
   on the same labels (not applicable, and passed, when the metric is undefined there -- AUC of one
   class; failed when either side answered nothing: there is nothing to compare).
"""

from __future__ import annotations

import dataclasses
import http.client
import math
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from kfstack.errors import DeploymentFailedError, InvalidParameterError
from kfstack.evaluation.task_metrics import BINARY, HIGHER_IS_BETTER, MULTICLASS, QUALITY_METRIC, evaluate
from kfstack.monitoring.drift import population_stability
from kfstack.serving.protocols import V1_PROBABILITIES, ServingProtocol
from kfstack.settings import Settings, setting

PROMOTE = "promote"
ROLLBACK = "rollback"
PSI_BINS = 10
# How a report names each quality metric.
DISPLAY_NAMES = {"auc": "AUC", "rmse": "RMSE"}


def display_name(metric: str) -> str:
    return DISPLAY_NAMES.get(metric, metric)


@dataclasses.dataclass(frozen=True)
class CanaryThresholds(Settings):
    """The decision rule's limits (see the module docstring); ``max_psi`` 0: not checked."""

    concern = "canary thresholds"

    max_error_rate: float = setting(0.01, ge=0.0, le=1.0)
    max_latency_ratio: float = setting(2.0, ge=1.0)
    latency_slack_ms: float = setting(5.0, ge=0.0)
    max_psi: float = setting(0.2, ge=0.0)
    max_quality_drop: float = setting(0.01, ge=0.0)


@dataclasses.dataclass(frozen=True)
class Endpoint:
    """A prediction URL (``http://host:port/v1/models/<name>:predict``, or the V2 ``infer`` one),
    the protocol spoken there, and the headers every request carries (a ``Host`` for an ingress,
    an ``Authorization`` for an auth proxy)."""

    name: str
    url: str
    headers: Mapping[str, str] = dataclasses.field(default_factory=dict)
    protocol: ServingProtocol = V1_PROBABILITIES


@dataclasses.dataclass
class EndpointFigures:
    """What one endpoint did during the replay."""

    name: str
    requests: int
    errors: int
    p50_ms: float
    p95_ms: float
    quality: float | None  # the task's metric on the records both endpoints answered
    predictions: np.ndarray  # per record (a number or a vector); NaN where its request failed
    first_error: str = ""

    @property
    def error_rate(self) -> float:
        return self.errors / self.requests if self.requests else 0.0

    @property
    def answered(self) -> np.ndarray:
        return self.predictions[_answered(self.predictions)]


# Below these, a figure the checks compare says little, and the report says so (the checks still
# decide): a PSI over ten bins needs a few hundred predictions per side before noise stops
# dominating it, and a p95 of fewer than twenty requests is the slowest one or two.
MIN_PSI_RECORDS = 200
MIN_LATENCY_REQUESTS = 20


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
    quality_metric: str = "auc"

    @property
    def decision(self) -> str:
        return PROMOTE if all(check.passed for check in self.checks) else ROLLBACK

    def metrics(self) -> dict[str, float]:
        """Scalars for a KFP ``Metrics`` artifact (an undefined quality left out)."""
        values: dict[str, float] = {"promoted": float(self.decision == PROMOTE)}
        if math.isfinite(self.psi):  # infinite when a side answered nothing: left out, as AUCs
            values["psi"] = round(self.psi, 6)
        for figures in (self.stable, self.canary):
            prefix = figures.name
            values[f"{prefix}_requests"] = float(figures.requests)
            values[f"{prefix}_error_rate"] = round(figures.error_rate, 6)
            values[f"{prefix}_p50_ms"] = round(figures.p50_ms, 3)
            values[f"{prefix}_p95_ms"] = round(figures.p95_ms, 3)
            if figures.quality is not None:
                values[f"{prefix}_{self.quality_metric}"] = round(figures.quality, 6)
        return values

    def cautions(self) -> list[str]:
        """What a holdout too small for the checks leaves them unable to tell."""
        found = []
        records = min(len(self.stable.answered), len(self.canary.answered))
        if records < MIN_PSI_RECORDS:
            found.append(
                f"prediction shift over {records} records: below {MIN_PSI_RECORDS} a PSI is mostly "
                "noise (replay more of the holdout: canary_records, or a larger holdout split)"
            )
        requests = min(self.stable.requests, self.canary.requests)
        if requests < MIN_LATENCY_REQUESTS:
            found.append(
                f"p95 latency of {requests} requests: below {MIN_LATENCY_REQUESTS} it is the slowest "
                "one or two (more records, or a smaller canary_batch_size)"
            )
        return found

    def summary(self) -> dict[str, Any]:
        """The compared figures as plain data (a run summary's ``serving`` entry)."""
        return {
            "decision": self.decision,
            "figures": self.metrics(),
            "failed_checks": [check.name for check in self.checks if not check.passed],
            "cautions": self.cautions(),
        }

    def markdown(self) -> str:
        def quality(figures: EndpointFigures) -> str:
            return "undefined" if figures.quality is None else f"{figures.quality:.4f}"

        name = display_name(self.quality_metric)

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
            f"| {name} on the records both answered | {quality(self.stable)} | {quality(self.canary)} |",
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
        cautions = self.cautions()
        if cautions:
            lines += ["", "**A small holdout**: the checks decided, but", *(f"- {c}" for c in cautions)]
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

    def predict(self, records: Sequence[Any]) -> tuple[np.ndarray | None, float, str]:
        """``(predictions or None, seconds, error message)`` for one request."""
        protocol = self.endpoint.protocol
        body = protocol.body(records)
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
            return protocol.parse(payload, len(records)), seconds, ""
        except ValueError as err:
            return None, seconds, str(err)

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


def probe(endpoint: Endpoint, records: Sequence[Any], timeout_seconds: float = 30.0) -> np.ndarray:
    """One request of ``records`` to ``endpoint``: a deployment's smoke test.

    Raises:
        DeploymentFailedError: It did not answer with one prediction per record.
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
    records: Sequence[Any],
    labels: Sequence[Any],
    batch_size: int = 20,
    timeout_seconds: float = 30.0,
    task: str = BINARY,
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
    answers_by_side: list[list[tuple[int, np.ndarray]]] = [[], []]
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
                    answers_by_side[side].append((start, values))
    finally:
        for client in clients:
            client.close()
    predictions = [_assemble(len(records), answers) for answers in answers_by_side]
    y = np.asarray(labels)
    # Both sides scored on the same records: those both answered. A canary failing a fifth of its
    # requests would otherwise be scored on a different sample than the stable one.
    both = _answered(predictions[0]) & _answered(predictions[1])
    return tuple(  # type: ignore[return-value]
        EndpointFigures(
            name=name,
            requests=len(latencies[side]),
            errors=errors[side],
            p50_ms=float(np.percentile(latencies[side], 50)),
            p95_ms=float(np.percentile(latencies[side], 95)),
            quality=quality(task, y[both], predictions[side][both]),
            predictions=predictions[side],
            first_error=first_error[side],
        )
        for side, name in enumerate(("stable", "canary"))
    )


def _assemble(rows: int, answers: list[tuple[int, np.ndarray]]) -> np.ndarray:
    """Every record's prediction from the batches answered; NaN where a batch failed."""
    tail = answers[0][1].shape[1:] if answers else ()
    values = np.full((rows, *tail), np.nan)
    for start, batch in answers:
        if batch.shape[1:] == tail:  # a batch of another shape is not comparable: left NaN
            values[start : start + len(batch)] = batch
    return values


def _answered(predictions: np.ndarray) -> np.ndarray:
    """Which records have a prediction (a number, or a vector with no NaN)."""
    return ~np.isnan(predictions.reshape(len(predictions), -1)).any(axis=1)


def quality(task: str, labels: np.ndarray, predictions: np.ndarray) -> float | None:
    """The task's quality metric of ``predictions``; None where it is undefined (no records, or
    AUC of one class) or the predictions do not fit the task."""
    if len(labels) == 0:
        return None
    try:
        return evaluate(task, labels, predictions).metrics.get(QUALITY_METRIC[task])
    except InvalidParameterError:
        return None


def psi(expected: np.ndarray, actual: np.ndarray, bins: int = PSI_BINS) -> float:
    """Population stability index of ``actual`` against ``expected``, binned at ``expected``'s
    quantiles, by the drift check's one formula (an empty bin counts at its share floor). Infinite
    when either side is empty."""
    if len(expected) == 0 or len(actual) == 0:
        return math.inf
    edges = np.unique(np.quantile(expected, np.linspace(0, 1, bins + 1))[1:-1])
    expected_count = np.bincount(np.searchsorted(edges, expected, side="right"), minlength=len(edges) + 1)
    actual_count = np.bincount(np.searchsorted(edges, actual, side="right"), minlength=len(edges) + 1)
    return population_stability(
        (expected_count / len(expected)).tolist(), (actual_count / len(actual)).tolist()
    )


def class_psi(expected: np.ndarray, actual: np.ndarray) -> float:
    """PSI of the predicted classes' shares (every class either side predicted)."""
    if len(expected) == 0 or len(actual) == 0:
        return math.inf
    classes = sorted({*expected.tolist(), *actual.tolist()})
    shares = [[float(np.mean(side == c)) for c in classes] for side in (expected, actual)]
    return population_stability(shares[0], shares[1])


def prediction_shift(task: str, stable: np.ndarray, canary: np.ndarray) -> float:
    """The canary's prediction shift against the stable's, by task (see the module docstring)."""
    if task == MULTICLASS:
        classes = [v.argmax(axis=1) if v.ndim == 2 else v for v in (stable, canary)]
        return class_psi(classes[0], classes[1])
    # A probability per class of a binary model: the positive class's column is its score.
    scores = [v[:, -1] if v.ndim == 2 else v for v in (stable, canary)]
    return psi(scores[0], scores[1])


def judge(
    stable: EndpointFigures, canary: EndpointFigures, thresholds: CanaryThresholds, task: str = BINARY
) -> CanaryReport:
    """The decision rule of the module docstring on two endpoints' figures."""
    t = thresholds
    shift = prediction_shift(task, stable.answered, canary.answered)
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
    metric = QUALITY_METRIC[task]
    name = display_name(metric)
    if len(stable.answered) == 0:
        checks.append(Check(name, False, "the stable predictor answered nothing", "a comparison"))
    elif len(canary.answered) == 0:
        checks.append(Check(name, False, "no predictions", "a comparison"))
    elif stable.quality is None or canary.quality is None:
        checks.append(Check(name, True, "not applicable", f"{name} is undefined on the replayed labels"))
    elif HIGHER_IS_BETTER[metric]:
        floor = stable.quality - t.max_quality_drop
        checks.append(
            Check(
                name,
                canary.quality >= floor,
                f"{canary.quality:.4f}",
                f">= {stable.quality:.4f} - {t.max_quality_drop}",
            )
        )
    else:  # an error (RMSE): on the label's scale, so a share of the stable's
        ceiling = stable.quality * (1 + t.max_quality_drop)
        checks.append(
            Check(
                name,
                canary.quality <= ceiling,
                f"{canary.quality:.4f}",
                f"<= {stable.quality:.4f} x (1 + {t.max_quality_drop})",
            )
        )
    return CanaryReport(
        stable=stable, canary=canary, psi=shift, checks=checks, thresholds=thresholds, quality_metric=metric
    )


def analyse(
    stable: Endpoint,
    canary: Endpoint,
    records: Sequence[Any],
    labels: Sequence[Any],
    thresholds: CanaryThresholds,
    batch_size: int = 20,
    task: str = BINARY,
) -> CanaryReport:
    """:func:`replay` then :func:`judge`."""
    stable_figures, canary_figures = replay(stable, canary, records, labels, batch_size, task=task)
    return judge(stable_figures, canary_figures, thresholds, task)
