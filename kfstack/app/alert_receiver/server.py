"""The receiver's HTTP endpoint: ``POST /alerts`` takes Alertmanager's webhook notifications,
``GET /healthz`` answers probes.

Answers, as Alertmanager 0.25 reads them (``notify/webhook/webhook.go``: its ``Retrier``
retries a 5xx and drops a 4xx):

- 200 with one entry per alert (``decisions``) once every alert is decided, whatever was
  decided (a skipped or refused alert is not retried: the same notification would be decided
  the same way);
- 401 without ``Authorization: Bearer <token>`` or with another token (the token is read from
  its file at each request, so a rotated Secret takes effect without a restart); 400 for a body
  that is not a webhook notification, naming what is wrong; 413 for a body over 1 MiB. Nothing
  is started in any of these cases;
- 503 when the platform failed (the KFP API unreachable): Alertmanager sends it again, and the
  alerts decided before the failure are then duplicates.
"""

from __future__ import annotations

import hmac
import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from kfstack.app.alert_receiver.decisions import Receiver
from kfstack.app.alert_receiver.notification import MalformedNotification, parse_notification
from kfstack.errors import KfstackError, UsageError

ALERTS_PATH = "/alerts"
HEALTH_PATH = "/healthz"
MAX_BODY_BYTES = 1 << 20

log = logging.getLogger(__name__)


def read_token(path: str) -> str:
    """The bearer token in file ``path`` (surrounding whitespace dropped).

    Raises:
        UsageError: The file cannot be read or is empty.
    """
    try:
        with open(path, encoding="utf-8") as f:
            token = f.read().strip()
    except OSError as err:
        raise UsageError(f"--token-file {path}: {err.strerror or err}") from None
    if not token:
        raise UsageError(f"--token-file {path}: the file is empty")
    return token


class AlertReceiverServer(ThreadingHTTPServer):
    """The endpoint on ``(address, port)``; port 0 takes a free one (:attr:`port`).

    Args:
        receiver: Decides on the alerts.
        token_file: The file holding the bearer token Alertmanager sends.
    """

    daemon_threads = True

    def __init__(self, receiver: Receiver, token_file: str, address: str = "0.0.0.0", port: int = 0) -> None:
        read_token(token_file)  # a missing or empty file stops the start, not the first alert
        self.receiver = receiver
        self.token_file = token_file
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

    def do_POST(self) -> None:
        if self.path != ALERTS_PATH:
            self._answer(404, {"error": f"no POST {self.path}; POST {ALERTS_PATH}"})
            return
        length = int(self.headers.get("Content-Length") or 0)
        if not self.server.authorized(self.headers.get("Authorization")):
            self._reject(401, "no valid bearer token", length)
            return
        if length > MAX_BODY_BYTES:
            self._reject(413, f"body of {length} bytes, over {MAX_BODY_BYTES}", length)
            return
        body = self.rfile.read(length)
        try:
            notification = parse_notification(body)
        except MalformedNotification as err:
            self._reject(400, f"not an Alertmanager webhook notification: {err}", 0)
            return
        try:
            decisions = self.server.receiver.handle(notification)
        except KfstackError as err:
            self._answer(503, {"error": f"{type(err).__name__}: {err}"})
            return
        self._answer(200, {"decisions": [d.record() for d in decisions]})

    def _reject(self, status: int, reason: str, unread: int) -> None:
        """Answers ``status``; the whole notification is refused before any alert is read."""
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
        if unread and unread <= MAX_BODY_BYTES:
            self.rfile.read(unread)  # the connection stays usable
        else:
            self.close_connection = True
        self._answer(status, {"error": reason})

    def _answer(self, status: int, data: Any) -> None:
        payload = json.dumps(data).encode()
        self.send_response(status)
        if status == 401:
            self.send_header("WWW-Authenticate", 'Bearer realm="kfstack-alert-receiver"')
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.client_address[0], *args)
