"""What the tests' fake HTTP servers share: the request record, serving on loopback in a thread
while inside ``with``, reading a request's body and writing an answer.

Each fake (``tests/app/fake_kfp_server.py``, ``tests/serving/fake_model_registry.py``) subclasses
:class:`LoopbackServer` and implements :meth:`LoopbackServer.handle`: its API, its checks and
its error bodies are its own.
"""

from __future__ import annotations

import dataclasses
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


@dataclasses.dataclass
class Request:
    """One request as a fake received it.

    Attributes:
        method: ``GET``, ``POST``, ``PATCH``, ``DELETE``.
        path: The URL path (each fake says from where).
        query: Query parameters (last value of each).
        body: The decoded body (``None`` when none; each fake says how it decodes).
        authorization: The ``Authorization`` header, if any.
    """

    method: str
    path: str
    query: dict[str, str]
    body: Any
    authorization: str | None


class LoopbackServer:
    """Answers every request with :meth:`handle`, on 127.0.0.1 at a free port, while inside
    ``with``."""

    thread_name = "fake-http"

    def __enter__(self) -> Self:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.handle(self)

            do_POST = do_PATCH = do_DELETE = do_GET

            def log_message(self, format: str, *args: Any) -> None:  # the test output stays clean
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        # A short poll: shutdown() waits for the loop to look (0.5 s by default, per test).
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.02},
            name=self.thread_name,
            daemon=True,
        )
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def handle(self, handler: BaseHTTPRequestHandler) -> None:
        """Answers one request (``handler.command``, ``handler.path``, :func:`body`, :func:`send`)."""
        raise NotImplementedError


def body(handler: BaseHTTPRequestHandler) -> bytes:
    """The request's body as sent (``b""`` without one)."""
    length = int(handler.headers.get("Content-Length") or 0)
    return handler.rfile.read(length) if length else b""


def send(
    handler: BaseHTTPRequestHandler, status: int, data: bytes, content_type: str = "application/json"
) -> None:
    """Answers with ``status`` and ``data``."""
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)
