"""What every kfstack model server adds to KServe's ``ModelServer``, whatever model it serves.

kfstack's servers -- a team's own ``kserve.Model``, the example predictors, the stand-ins for
KServe's format runtimes (:mod:`kfstack.serving.standard_formats`) -- run on KServe's Python
``ModelServer`` (V1 and V2 HTTP). On top of it (:func:`install_request_hooks`):

- **Open Inference Protocol clients as they are**: Triton's ``tritonclient.http`` sends a V2
  JSON body with no ``Content-Type`` header; KServe 0.21 then treats the body as binary and
  answers 400 "inference-header-content-length missing". A V2 infer request with neither header
  is read as the JSON it is (a binary request carries ``inference-header-content-length`` and
  is left alone).
- **A 400 for every malformed request**: FastAPI's 422 for a body that is not a V2 inference
  request becomes a 400 naming the first place that is wrong, as every other bad request gets,
  and Starlette's own refusals (a body it cannot parse) carry their reason as ``error`` too.
- **No payloads in the logs**: KServe logs a refused request's traceback, whose message may
  quote the request; kfstack's servers log one line saying a request was refused.
- **Bounded bodies, whatever the framing**: the body is read here, before the app sees it,
  counting what arrives: a ``Content-Length`` above ``max_body_bytes`` is refused with a 413
  unread, and a chunked body (which has no length) with a 413 the moment its count passes the
  limit, so that no request makes the process hold more than the limit. Either answer closes
  the connection.
- **A deadline on the body**: a body not whole ``body_read_seconds`` after the headers gets a
  408 and its connection closed, so that a client that sends headers and then nothing (or a
  trickle) holds neither the in-flight gauge below nor a slot for longer.
- **Requests counted by outcome** on ``/metrics``: ``kfstack_predictor_requests_total{model_name,
  protocol, outcome}`` with ``outcome`` ``ok`` (2xx), ``bad_request`` (4xx), ``error`` (5xx).
- **The queue**: ``kfstack_predictor_requests_in_flight{model_name, protocol}``, the requests
  this process has accepted and not yet answered, counted from the moment their headers arrive
  (before the body is read, so a slow upload counts as queued work) until the response ends or
  the client goes away.
- **One process per pod** (:func:`check_one_worker`): every figure above, and live drift's
  window, is one process's. KServe's multi-process server (``--workers`` > 1) shares no metrics
  registry between its workers, so each scrape would read whichever worker took the connection:
  counters would seem to reset and a gauge to jump. kfstack's servers refuse ``--workers`` above
  1; a model scales with replicas, one server process each.
- **Latency of the whole request**: ``kfstack_predictor_request_duration_seconds{model_name,
  protocol}``, a histogram from the headers to the end of the response, whatever the outcome
  (KServe's own ``request_predict_seconds`` times the model's ``predict`` alone). Its bucket
  bounds are written with a decimal point where Prometheus 3 would add one, so an ``le``
  selector means the same on Prometheus 2 and 3.

- **Live drift** (:func:`attach_live_drift`, :mod:`kfstack.monitoring.live_drift`): where the
  model directory has a training profile (``profile.json``), the last ``--live_drift_window_rows``
  rows answered against it, on ``/metrics`` once the window is full:
  ``kfstack_predictor_drift_psi{model_name, feature}`` (one series per profiled feature, ignored
  ones included) and ``kfstack_predictor_drift_max_psi{model_name}`` (over the features that
  decide), computed at the scrape; ``kfstack_predictor_drift_window_rows{model_name}`` and
  ``kfstack_predictor_drift_rows_dropped_total{model_name}`` (observed rows that could not be
  binned) always. A request only hands its rows over; they are binned in bulk at the scrape or
  every few hundred rows. Like the in-flight gauge, one process's window.

Importing ``kserve`` parses ``sys.argv`` for its own flags: a server runs as its own process.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import logging
import re
import time
from collections.abc import Iterator, Sequence
from typing import Any

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from prometheus_client import REGISTRY, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector
from starlette.exceptions import HTTPException as StarletteHTTPException

from kfstack.errors import InvalidParameterError
from kfstack.monitoring import live_drift
from kfstack.monitoring.drift import feature_names
from kfstack.monitoring.live_drift import NO_LIVE_DRIFT, LiveDrift, LiveDriftSettings

logger = logging.getLogger("kfstack.model_server")
# A model class's features that drift by design (the calendar): live drift's default ignored ones.
IGNORED_FEATURES_ATTRIBUTE = "drift_ignored_features"

# 10,000 records of ~25 fields is about 4 MiB of JSON; four times that is refused unread.
DEFAULT_MAX_BODY_BYTES = 16 * 2**20
# The limit's 16 MiB in 30 s is about 4.5 Mbit/s, far below what a client inside a cluster sends;
# a slower client is stalled or hostile.
DEFAULT_BODY_READ_SECONDS = 30.0
# Where a server listens unless told otherwise: KServe's 0.0.0.0, which a pod needs; the
# embedded platform's servers and ``kfstack serve`` pass 127.0.0.1 (:data:`LOOPBACK`).
ALL_INTERFACES, LOOPBACK = "0.0.0.0", "127.0.0.1"
OK, BAD_REQUEST, ERROR = "ok", "bad_request", "error"
UNKNOWN_MODEL = "unknown"
# KServe's header for a binary V2 body (the JSON part's length); its absence means plain JSON.
BINARY_HEADER = b"inference-header-content-length"

REQUESTS = Counter(
    "kfstack_predictor_requests",
    "Prediction requests by protocol and outcome (ok: 2xx, bad_request: 4xx, error: 5xx)",
    ["model_name", "protocol", "outcome"],
)
IN_FLIGHT = Gauge(
    "kfstack_predictor_requests_in_flight",
    "Prediction requests accepted and not yet answered by this process, from their headers on",
    ["model_name", "protocol"],
)
# From 5 ms to 10 s: a p95 alert's 250 ms and 1 s lines fall on bucket bounds.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
REQUEST_SECONDS = Histogram(
    "kfstack_predictor_request_duration_seconds",
    "Prediction requests' time from their headers to the end of the response",
    ["model_name", "protocol"],
    buckets=LATENCY_BUCKETS,
)
_PREDICT_PATH = re.compile(r"^/(?P<protocol>v1)/models/(?P<model>[^/:]+):predict$")
_INFER_PATH = re.compile(r"^/(?P<protocol>v2)/models/(?P<model>[^/]+)(/versions/[^/]+)?/infer$")


def _with_json_content_type(scope: dict) -> dict:
    """A V2 infer request's scope with ``Content-Type: application/json`` when it carries neither
    that header nor the binary one (Triton's HTTP client in JSON mode sends none)."""
    headers = scope.get("headers") or []
    for name, _ in headers:
        if name.lower() in (b"content-type", BINARY_HEADER):
            return scope
    return {**scope, "headers": [*headers, (b"content-type", b"application/json")]}


class _BodyTooLarge(Exception):
    pass


class _ClientGone(Exception):
    pass


async def _read_body(receive: Any, limit: int) -> bytes:
    """The request's whole body, counted as it arrives.

    Raises:
        _BodyTooLarge: It passed ``limit`` bytes (the rest is not read).
        _ClientGone: The client disconnected first.
    """
    message = await receive()
    if message["type"] == "http.disconnect":
        raise _ClientGone
    body: bytes = message.get("body", b"")
    if len(body) > limit:
        raise _BodyTooLarge
    if not message.get("more_body", False):
        return body  # most bodies come whole in one message: no copy
    # Chunks joined once at the end, not a buffer grown and copied again at every one.
    chunks, size = [body], len(body)
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _ClientGone
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise _BodyTooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _closing(status: int, error: str) -> JSONResponse:
    """An answer after which the server closes the connection (the body was not read whole)."""
    return JSONResponse(status_code=status, content={"error": error}, headers={"Connection": "close"})


def _outcome(status: int) -> str:
    return OK if status < 400 else BAD_REQUEST if status < 500 else ERROR


class _Series:
    """One (model, protocol)'s labelled metrics, resolved once: ``labels()`` costs more than the
    update it leads to, and every request would pay it four times. An outcome's counter is made
    on its first request, so /metrics shows no series of an outcome that never happened."""

    __slots__ = ("_labels", "_outcomes", "in_flight", "seconds")

    def __init__(self, model: str, protocol: str) -> None:
        self._labels = (model, protocol)
        self.in_flight = IN_FLIGHT.labels(model, protocol)
        self.seconds = REQUEST_SECONDS.labels(model, protocol)
        self._outcomes: dict[str, Any] = {}

    def count(self, outcome: str) -> None:
        counter = self._outcomes.get(outcome)
        if counter is None:
            counter = self._outcomes[outcome] = REQUESTS.labels(*self._labels, outcome)
        counter.inc()


class RequestAccounting:
    """ASGI middleware around the predict and infer routes (see the module docstring)."""

    def __init__(
        self,
        app: Any,
        model_name: str,
        max_body_bytes: int,
        body_read_seconds: float = DEFAULT_BODY_READ_SECONDS,
    ) -> None:
        self.app = app
        self.model_name = model_name
        self.max_body_bytes = max_body_bytes
        self.body_read_seconds = body_read_seconds
        # At most four: the served model's name or "unknown", by protocol.
        self._series: dict[tuple[str, str], _Series] = {}

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        match = (
            (_PREDICT_PATH.match(scope["path"]) or _INFER_PATH.match(scope["path"]))
            if scope["type"] == "http"
            else None
        )
        if match is None:
            await self.app(scope, receive, send)
            return
        protocol = match["protocol"]
        if protocol == "v2" and scope.get("method") == "POST":
            scope = _with_json_content_type(scope)
        # Only the served model's name becomes a label value: a fuzzed path must not mint series.
        model = self.model_name if match["model"] == self.model_name else UNKNOWN_MODEL
        series = self._series.get((model, protocol))
        if series is None:
            series = self._series[(model, protocol)] = _Series(model, protocol)
        # Queued from here: the headers are in, the body is not read yet.
        series.in_flight.inc()
        started = time.perf_counter()
        try:
            await self._answer(scope, receive, send, series)
        finally:
            series.seconds.observe(time.perf_counter() - started)
            series.in_flight.dec()

    async def _answer(self, scope: dict, receive: Any, send: Any, series: _Series) -> None:
        """The request's answer, counted by outcome: a 413 for a body over the limit, a 408 for
        one not whole within the deadline, else the app's with the body read here."""
        length = b"0"
        for name, value in scope.get("headers") or ():
            if name == b"content-length":
                length = value  # the last one, as a dict of the headers would keep
        refusal = None
        if length.isdigit() and int(length) > self.max_body_bytes:
            refusal = _closing(413, f"body: {int(length)} bytes, more than the {self.max_body_bytes} allowed")
        else:
            try:
                # asyncio.timeout, not wait_for: no task of its own for every request.
                async with asyncio.timeout(self.body_read_seconds):
                    body = await _read_body(receive, self.max_body_bytes)
            except _BodyTooLarge:
                refusal = _closing(413, f"body: more than the {self.max_body_bytes} bytes allowed")
            except TimeoutError:
                refusal = _closing(408, f"body: not received whole within {self.body_read_seconds:g} s")
            except _ClientGone:
                return  # nobody to answer
        if refusal is not None:
            await refusal(scope, receive, send)
            series.count(BAD_REQUEST)
            return
        replay = _Replay(body, receive)
        try:
            await self.app(scope, replay.receive, replay.send_to(send))
        finally:
            series.count(replay.outcome)


class _Replay:
    """The app's side of one request whose body was read here: ``receive`` hands it the body,
    then what the connection says (a disconnect); ``send_to`` notes the answer's outcome."""

    __slots__ = ("_body", "_receive", "outcome")

    def __init__(self, body: bytes, receive: Any) -> None:
        self._body: bytes | None = body
        self._receive = receive
        self.outcome = ERROR  # no answer started: the app failed

    async def receive(self) -> dict:
        body, self._body = self._body, None
        if body is not None:
            return {"type": "http.request", "body": body, "more_body": False}
        return dict(await self._receive())

    def send_to(self, send: Any) -> Any:
        async def noting(message: dict) -> None:
            if message["type"] == "http.response.start":
                self.outcome = _outcome(message["status"])
            await send(message)

        return noting


async def _request_validation_error(_request: Any, exc: Exception) -> JSONResponse:
    """FastAPI's 422 for a body that is not a V2 inference request, as the 400 every other
    malformed request gets, naming the first place that is wrong."""
    assert isinstance(exc, RequestValidationError)
    errors = exc.errors()
    first = errors[0] if errors else {}
    location = [str(part) for part in first.get("loc", ()) if part != "body"]
    if first.get("type") == "json_invalid":  # its location is a character offset
        offset = location[-1] if location else "?"
        return JSONResponse(
            status_code=400, content={"error": f"body: not JSON ({first.get('msg')} at character {offset})"}
        )
    where = ".".join(location) or "body"
    message = first.get("msg", "not a valid request")
    return JSONResponse(status_code=400, content={"error": f"{where}: {message}"})


async def _http_error(_request: Any, exc: Exception) -> JSONResponse:
    """Starlette's own refusals (a body it cannot parse, e.g. JSON nested past the parser's
    depth; an unknown route) in the ``{"error": ...}`` shape of every other refusal."""
    assert isinstance(exc, StarletteHTTPException)
    return JSONResponse(status_code=exc.status_code, content={"error": f"{exc.detail}"}, headers=exc.headers)


class _NoPayloadInLogs(logging.Filter):
    """KServe logs every refused request at ERROR with its traceback, whose message may quote the
    request (``could not convert string to float: '<a value>'``): a hostile client could fill the
    log, and write what it likes into it. A refusal is logged as one line that says only that."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.exc_info:  # every record passes here: the common case costs no import
            return True
        from kserve.errors import InvalidInput

        if isinstance(record.exc_info[1], InvalidInput):
            record.msg, record.args = "request refused (400): malformed input", ()
            record.exc_info, record.exc_text = None, None
            record.levelno, record.levelname = logging.INFO, "INFO"
        return True


def check_one_worker(workers: int) -> None:
    """Refuses KServe's multi-process server (module docstring, "One process per pod").

    Raises:
        InvalidParameterError: ``workers`` above 1.
    """
    if workers > 1:
        raise InvalidParameterError(
            f"--workers={workers}: kfstack's metrics and live drift are one process's, and KServe's "
            f"worker processes share no metrics registry (a scrape would read one worker at random); "
            f"serve with one worker and scale with replicas"
        )


def install_request_hooks(
    app: FastAPI,
    model_name: str,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    body_read_seconds: float = DEFAULT_BODY_READ_SECONDS,
) -> None:
    """Adds the accounting middleware and the 400 for invalid V2 bodies to KServe's app."""
    app.add_middleware(
        RequestAccounting,
        model_name=model_name,
        max_body_bytes=max_body_bytes,
        body_read_seconds=body_read_seconds,
    )
    app.add_exception_handler(RequestValidationError, _request_validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    kserve_log = logging.getLogger("kserve")
    if not any(isinstance(f, _NoPayloadInLogs) for f in kserve_log.filters):
        kserve_log.addFilter(_NoPayloadInLogs())


def add_server_arguments(parser: argparse.ArgumentParser) -> None:
    """kfstack's own flags of every model server, beside KServe's (``--http_port``...)."""
    parser.add_argument(
        "--bind_address",
        default=ALL_INTERFACES,
        help=f"the address the HTTP server listens on (default {ALL_INTERFACES}, as KServe's, which a "
        f"pod needs; {LOOPBACK}: this machine alone, as the embedded platform's servers)",
    )
    parser.add_argument(
        "--max_body_bytes",
        type=int,
        default=DEFAULT_MAX_BODY_BYTES,
        help=f"a larger request body gets a 413, whatever its framing (default {DEFAULT_MAX_BODY_BYTES})",
    )
    parser.add_argument(
        "--body_read_seconds",
        type=float,
        default=DEFAULT_BODY_READ_SECONDS,
        help="a body not whole this many seconds after its headers gets a 408 "
        f"(default {DEFAULT_BODY_READ_SECONDS:g})",
    )


def server_options(args: argparse.Namespace) -> dict[str, Any]:
    """The arguments of :func:`serve` that :func:`add_server_arguments`' flags give, by name:
    ``serve(model, args.http_port, args.grpc_port, **server_options(args))``."""
    return {
        "max_body_bytes": args.max_body_bytes,
        "bind_address": args.bind_address,
        "body_read_seconds": args.body_read_seconds,
    }


def serve(
    model: Any,
    http_port: int,
    grpc_port: int,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    *,
    bind_address: str = ALL_INTERFACES,
    body_read_seconds: float = DEFAULT_BODY_READ_SECONDS,
    **server_options: Any,
) -> None:
    """Serves the loaded ``model`` on KServe's ``ModelServer`` until SIGTERM/SIGINT: kfstack's
    request hooks on, one process (see "One process per pod"; the server's flags went through
    :func:`check_one_worker`), listening on ``bind_address``, and, where an embedded run
    started it, stopping when the run's owner is gone even if it could not stop the server.
    ``server_options``: more of ``ModelServer``'s (``enable_grpc``...)."""
    import kserve

    from kfstack.serving.local_services import exit_with_owner

    install_request_hooks(kserve.model_server.app, model.name, max_body_bytes, body_read_seconds)
    exit_with_owner()
    server = _bound_model_server(kserve.ModelServer, bind_address)
    server(http_port=http_port, grpc_port=grpc_port, workers=1, **server_options).start([model])


def _bound_model_server(model_server: type, bind_address: str) -> type:
    """KServe's ``ModelServer`` listening on ``bind_address``.

    KServe 0.21 fixes its REST server's address at 0.0.0.0: ``ModelServer.start`` builds the
    server's uvicorn config with that host, then calls ``setup_event_loop`` before it serves.
    This subclass sets the config's host in between, so the same app, routes and middleware
    listen where they are told. (The gRPC server, which embedded servers leave off, keeps
    KServe's address.)
    """

    class BoundModelServer(model_server):
        def setup_event_loop(self) -> None:
            rest = getattr(self, "_rest_server", None)
            if rest is None:
                raise RuntimeError("KServe's ModelServer built no REST server to bind")
            rest.config.host = bind_address
            super().setup_event_loop()

    return BoundModelServer


def call_predict(model: Any, payload: Any) -> Any:
    """``model.predict(payload)`` in-process, whether the model's ``predict`` is a coroutine or
    not (KServe allows both): how evaluation scores through a server's own model class."""
    result = model.predict(payload)
    if inspect.isawaitable(result):
        return asyncio.run(_awaited(result))
    return result


async def _awaited(result: Any) -> Any:
    return await result


class LiveDriftCollector(Collector):
    """The live-drift gauges of one model (see the module docstring), read from its window when
    ``/metrics`` is scraped: the rows observed since the last scrape are binned then and the PSI
    computed, not per request."""

    def __init__(self, model_name: str, monitor: LiveDrift) -> None:
        self.model_name = model_name
        self.monitor = monitor

    def describe(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        """The families this collector may export (so that registering one twice fails at once)."""
        for name in ("window_rows", "psi", "max_psi"):
            yield GaugeMetricFamily(f"kfstack_predictor_drift_{name}", "", labels=[])
        yield CounterMetricFamily("kfstack_predictor_drift_rows_dropped", "", labels=[])

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        rows = GaugeMetricFamily(
            "kfstack_predictor_drift_window_rows",
            "Rows in the live-drift window now (the PSI is exported once it is full)",
            labels=["model_name"],
        )
        rows.add_metric([self.model_name], self.monitor.rows)  # bins the pending rows first
        yield rows
        dropped = CounterMetricFamily(
            "kfstack_predictor_drift_rows_dropped",
            "Rows observed for live drift that could not be binned (a profiled feature missing, "
            "text for a number), left out of the window; the server logs why",
            labels=["model_name"],
        )
        dropped.add_metric([self.model_name], self.monitor.dropped_rows)
        yield dropped
        report = self.monitor.report()
        if report is None:
            return
        psi = GaugeMetricFamily(
            "kfstack_predictor_drift_psi",
            "PSI of the live window against the training profile, per profiled feature",
            labels=["model_name", "feature"],
        )
        for feature, value in sorted(report.psi.items()):
            psi.add_metric([self.model_name, feature], value)
        yield psi
        highest = GaugeMetricFamily(
            "kfstack_predictor_drift_max_psi",
            "The largest live PSI among the features that decide (the ignored ones left out)",
            labels=["model_name"],
        )
        highest.add_metric([self.model_name], report.max_psi)
        yield highest


def add_live_drift_arguments(parser: argparse.ArgumentParser) -> None:
    """A server's live-drift flags (the window's size and how often its figures are computed)."""
    defaults = LiveDriftSettings()
    parser.add_argument(
        "--live_drift",
        default=defaults.mode,
        choices=live_drift.MODES,
        help="watch the rows served against the model directory's profile.json: auto (where it can), "
        "on (refuse to start where it cannot), off",
    )
    parser.add_argument(
        "--live_drift_window_rows",
        type=int,
        default=defaults.window_rows,
        help="rows the live-drift window holds (the PSI is exported once it is full)",
    )
    parser.add_argument(
        "--live_drift_request_rows",
        type=int,
        default=defaults.request_rows,
        help="the most rows one request adds to the window, a random sample of a larger one, so "
        "that no single client steers it (default 0: 1%% of the window)",
    )
    parser.add_argument(
        "--live_drift_max_psi",
        type=float,
        default=defaults.max_psi,
        help="the PSI above which the server logs live drift (an alert compares its own line)",
    )
    parser.add_argument(
        "--live_drift_ignore_features",
        default=None,
        help="comma-separated features measured but left out of the max PSI (the calendar, say); "
        f"default: the model's own {IGNORED_FEATURES_ATTRIBUTE}, else none",
    )


def live_drift_settings(args: argparse.Namespace, model: Any) -> LiveDriftSettings:
    """The settings of :func:`add_live_drift_arguments`' flags for ``model``: without
    ``--live_drift_ignore_features``, the features its class declares as
    :data:`IGNORED_FEATURES_ATTRIBUTE` (a model knows which of its features drift by design).

    Raises:
        InvalidParameterError: A value out of range, naming its flag.
    """
    ignored = args.live_drift_ignore_features
    return LiveDriftSettings(
        mode=args.live_drift,
        window_rows=args.live_drift_window_rows,
        request_rows=args.live_drift_request_rows,
        max_psi=args.live_drift_max_psi,
        ignored_features=(
            tuple(getattr(model, IGNORED_FEATURES_ATTRIBUTE, ()))
            if ignored is None
            else feature_names(ignored)
        ),
    )


def attach_live_drift(
    model: Any,
    model_dir: str,
    settings: LiveDriftSettings,
    columns: Sequence[str] | None = None,
    by_position: bool = False,
) -> LiveDrift | None:
    """Gives ``model`` its ``drift`` (a window over ``model_dir``'s ``profile.json``, or
    ``NO_LIVE_DRIFT``) and exports the window's gauges.

    Args:
        model: The loaded ``kserve.Model``; it feeds ``model.drift.observe(...)`` the rows it
            answered (kfstack's stand-ins do; a team's own model calls it itself).
        by_position: The model takes rows by position (a matrix): ``columns`` names them in
            order, else the profile's ``feature_order``.

    Returns:
        The window, or None where live drift is off: ``settings.mode`` is ``off``, or ``auto``
        and the directory has no profile or one the requests cannot be mapped onto (logged).

    Raises:
        InvalidParameterError: ``settings.mode`` is ``on`` and live drift cannot run (why).
    """
    model.drift = NO_LIVE_DRIFT
    if settings.mode == live_drift.OFF:
        logger.info("live drift off (--live_drift=off)")
        return None
    try:
        reference = live_drift.read_reference(model_dir)
        if reference is None:
            raise InvalidParameterError(f"no {live_drift.PROFILE_FILE} in the model directory {model_dir}")
        if by_position:
            columns = columns or reference.feature_order
            if not columns:
                raise InvalidParameterError(
                    "the model takes rows by position and neither records its feature names nor does "
                    f"the profile list them in order (its {live_drift.FEATURE_ORDER_KEY!r})"
                )
        monitor = LiveDrift(
            reference,
            settings.window_rows,
            settings.thresholds,
            columns if by_position else None,
            request_rows=settings.request_rows,
        )
    except InvalidParameterError as err:
        if settings.mode == live_drift.ON:
            raise InvalidParameterError(f"--live_drift=on: {err}") from err
        logger.warning("live drift off: %s", err)
        return None
    model.drift = monitor
    REGISTRY.register(LiveDriftCollector(model.name, monitor))
    logger.info(
        "live drift on: %d profiled features, a window of %d rows",
        len(reference.features),
        settings.window_rows,
    )
    return monitor
