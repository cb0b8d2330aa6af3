"""The receiver's HTTP endpoint: ``POST /alerts`` takes Alertmanager's webhook notifications,
``GET /healthz`` answers probes.

Answers, as Alertmanager 0.25 reads them (``notify/webhook/webhook.go``: its ``Retrier``
retries a 5xx and drops a 4xx):

- 200 with one entry per alert (``decisions``) once every alert is decided, whatever was
  decided (a skipped or refused alert is not retried: the same notification would be decided
  the same way);
- 401 without ``Authorization: Bearer <token>`` or with another token (the token is read from
  its file at each request, so a rotated Secret takes effect without a restart): answered before
  the body is read, and the connection closed; 411 without ``Content-Length`` (Alertmanager, a Go
  ``net/http`` client posting a buffered body, always sends one); 400 for a ``Content-Length``
  that is not a non-negative decimal integer, or a body that is not a webhook notification,
  naming what is wrong (JSON nested past the parser's depth included); 413 for a body over
  1 MiB; 408 when the body does not arrive within the request timeout. Nothing is started in
  any of these cases, and no body is read that was not announced and allowed;
- 503 when the platform failed (the KFP API unreachable): Alertmanager sends it again, and the
  alerts decided before the failure are then duplicates.

Every connection's socket times out after ``request_timeout_s`` (default 10 s) of silence:
a client that connects and stalls, before or inside its request, is dropped then instead of
holding one of the server's threads for good.
"""

from __future__ import annotations

import dataclasses
import hmac
import json
import logging
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from kfstack.app.alert_receiver.decisions import Receiver
from kfstack.app.alert_receiver.notification import MalformedNotification, parse_notification
from kfstack.app.alert_receiver.tokens import read_token
from kfstack.errors import KfstackError, UsageError

ALERTS_PATH = "/alerts"
HEALTH_PATH = "/healthz"
MAX_BODY_BYTES = 1 << 20
DEFAULT_REQUEST_TIMEOUT_S = 10.0
# RFC 9110 section 8.6: Content-Length = 1*DIGIT (no sign, no spaces inside, no list).
_CONTENT_LENGTH = re.compile(r"[0-9]+")

log = logging.getLogger(__name__)


class AlertReceiverServer(ThreadingHTTPServer):
    """The endpoint on ``(address, port)``; port 0 takes a free one (:attr:`port`).

    Args:
        receiver: Decides on the alerts.
        token_file: The file holding the bearer token Alertmanager sends.
        request_timeout_s: How long a connection may stay silent before it is dropped.
    """

    daemon_threads = True
    # The listen backlog (socketserver's default is 5): Alertmanager sends a group's notifications
    # at once and retries them together, and a connection beyond the backlog is reset. 1024 is
    # Go's and nginx's usual figure; the kernel caps it at net.core.somaxconn.
    request_queue_size = 1024

    def __init__(
        self,
        receiver: Receiver,
        token_file: str,
        address: str = "0.0.0.0",
        port: int = 0,
        request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
    ) -> None:
        read_token(token_file)  # a missing or empty file stops the start, not the first alert
        self.receiver = receiver
        self.token_file = token_file
        self.request_timeout_s = request_timeout_s
        super().__init__((address, port), _Handler)

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def authorized(self, header: str | None) -> bool:
        try:
            token = read_token(self.token_file)
        except UsageError as err:
            log.error("the token file cannot be read: %s", err)
            return False
        scheme, _, given = (header or "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())

    def serve_in_thread(self) -> threading.Thread:
        thread = threading.Thread(target=self.serve_forever, name="alert-receiver", daemon=True)
        thread.start()
        return thread


class _Handler(BaseHTTPRequestHandler):
    server: AlertReceiverServer
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        if self.path == HEALTH_PATH:
            self._answer(200, {"status": "ok"})
        else:
            self._answer(404, {"error": f"no GET {self.path}; POST {ALERTS_PATH}"})

    def setup(self) -> None:
        super().setup()
        # Every read and write on the socket: one that times out ends the connection
        # (BaseHTTPRequestHandler.handle_one_request catches TimeoutError, CPython 3.11
        # Lib/http/server.py), or is answered 408 while the body is read (do_POST).
        self.connection.settimeout(self.server.request_timeout_s)

    def do_POST(self) -> None:
        if self.path != ALERTS_PATH:
            self._reject(404, f"no POST {self.path}; POST {ALERTS_PATH}")
            return
        if not self.server.authorized(self.headers.get("Authorization")):
            self._reject(401, "no valid bearer token")
            return
        length = _content_length(self.headers.get_all("Content-Length") or [])
        if isinstance(length, _Refused):
            self._reject(length.status, length.reason)
            return
        if length > MAX_BODY_BYTES:
            self._reject(413, f"body of {length} bytes, over {MAX_BODY_BYTES}")
            return
        try:
            body = self.rfile.read(length)
        except TimeoutError:
            self._reject(408, f"the body did not arrive within {self.server.request_timeout_s:g} s")
            return
        if len(body) < length:
            self._reject(400, f"the body ended after {len(body)} of {length} bytes")
            return
        try:
            notification = parse_notification(body)
        except MalformedNotification as err:
            # The body was read whole: the connection stays usable.
            self._reject(400, f"not an Alertmanager webhook notification: {err}", keep_alive=True)
            return
        try:
            decisions = self.server.receiver.handle(notification)
        except KfstackError as err:
            self._answer(503, {"error": f"{type(err).__name__}: {err}"})
            return
        self._answer(200, {"decisions": [d.record() for d in decisions]})

    def _reject(self, status: int, reason: str, keep_alive: bool = False) -> None:
        """Answers ``status``; the whole notification is refused before any alert is read. Unless
        the body was read, the connection is closed: its unread bytes are never read."""
        log.warning(
            json.dumps(
                {
                    "decision": "rejected",
                    "http_status": status,
                    "reason": reason,
                    "client": self.client_address[0],
                }
            )
        )
        if not keep_alive:
            self.close_connection = True
        self._answer(status, {"error": reason})

    def _answer(self, status: int, data: Any) -> None:
        payload = json.dumps(data).encode()
        self.send_response(status)
        if status == 401:
            self.send_header("WWW-Authenticate", 'Bearer realm="kfstack-alert-receiver"')
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.client_address[0], *args)


@dataclasses.dataclass(frozen=True)
class _Refused:
    status: int
    reason: str


def _content_length(values: list[str]) -> int | _Refused:
    """The body's announced length, or why it cannot be trusted: missing (411), or not one
    non-negative decimal integer (400) -- "-1" or "abc" must never reach ``rfile.read``."""
    if not values:
        return _Refused(411, "Content-Length is missing: the body's length must be announced")
    distinct = {value.strip() for value in values}
    if len(distinct) != 1:
        return _Refused(400, f"Content-Length: conflicting values {sorted(distinct)}")
    (text,) = distinct
    if not _CONTENT_LENGTH.fullmatch(text):
        return _Refused(400, f"Content-Length: expected a non-negative integer, got {text!r}")
    return int(text)
