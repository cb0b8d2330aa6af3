"""The receiver's HTTP endpoint against clients that misbehave, on a real socket: a
``Content-Length`` that is negative, not a number or missing is refused at once, with or without
the token, and no unannounced body is read; a client that stalls is dropped after the request
timeout while others are served; and two notifications for one model arriving together, against a
KFP API whose run creation is slow, start exactly one run (the receiver's lock)."""

from __future__ import annotations

import datetime
import json
import socket
import threading
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from kfstack.app.alert_receiver.cluster import KfpRetraining
from kfstack.app.alert_receiver.decisions import SKIPPED, STARTED, Receiver
from kfstack.app.alert_receiver.server import AlertReceiverServer
from tests.app import fake_kfp_server
from tests.app.fake_kfp_server import FakeKfpServer
from tests.app.test_alert_receiver import NAMESPACE, TOKEN, Clock, add_schedule, drift_alert, notification

fake_kfp = fake_kfp_server.fake_kfp

# Short, so a stalled client is dropped quickly here; the default is 10 s.
REQUEST_TIMEOUT_S = 0.5
# How long a test waits for an answer that must come (well past the timeout).
ANSWER_WITHIN_S = 5.0


@pytest.fixture
def endpoint(tmp_path, fake_kfp: FakeKfpServer) -> Iterator[tuple[str, int]]:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    receiver = Receiver(KfpRetraining(fake_kfp.url, namespaces=[NAMESPACE]), clock=Clock())
    server = AlertReceiverServer(
        receiver, str(token_file), "127.0.0.1", 0, request_timeout_s=REQUEST_TIMEOUT_S
    )
    thread = server.serve_in_thread()
    yield "127.0.0.1", server.port
    server.shutdown()
    server.server_close()
    thread.join()


def exchange(address: tuple[str, int], head: str, body: bytes = b"") -> tuple[bytes, float]:
    """Sends ``head`` (and ``body``) on a fresh connection, keeps it open, and reads until the
    server closes it; returns what came back and how long that took. The client never closes
    first: a server that waited for it would make this run into the socket's own timeout."""
    started = time.monotonic()
    with socket.create_connection(address, timeout=ANSWER_WITHIN_S) as conn:
        conn.sendall(head.encode() + body)
        received = b""
        try:
            while chunk := conn.recv(65536):
                received += chunk
        except TimeoutError:
            pytest.fail(f"no answer and no close within {ANSWER_WITHIN_S:g} s; got {received!r}")
    return received, time.monotonic() - started


def status_of(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])


def head(content_length: str | None, token: str | None = TOKEN) -> str:
    lines = ["POST /alerts HTTP/1.1", "Host: receiver", "Content-Type: application/json"]
    if token:
        lines.append(f"Authorization: Bearer {token}")
    if content_length is not None:
        lines.append(f"Content-Length: {content_length}")
    return "\r\n".join(lines) + "\r\n\r\n"


@pytest.mark.parametrize(
    ("content_length", "token", "status", "needle"),
    [
        ("-1", None, 401, b"no valid bearer token"),  # unread: rfile.read(-1) would wait for EOF
        ("-1", TOKEN, 400, b"expected a non-negative integer, got '-1'"),
        ("abc", TOKEN, 400, b"expected a non-negative integer, got 'abc'"),
        ("abc", None, 401, b"no valid bearer token"),
        ("+5", TOKEN, 400, b"got '+5'"),
        (None, TOKEN, 411, b"Content-Length is missing"),
        (str(2 << 20), TOKEN, 413, b"over 1048576"),
    ],
)
def test_a_bad_content_length_is_answered_at_once_and_the_connection_closed(
    endpoint, fake_kfp, content_length, token, status, needle
):
    add_schedule(fake_kfp, "flights-delay-nightly")
    # A body follows, as a client that lies about its length sends one; the server must answer
    # without reading to EOF, and close (the client keeps its side open).
    body = json.dumps(notification(drift_alert())).encode()
    answer, took = exchange(endpoint, head(content_length, token), body)
    assert status_of(answer) == status and needle in answer, answer
    assert b"Connection: close" in answer
    assert took < REQUEST_TIMEOUT_S + 1.0, f"answered after {took:.2f} s"
    assert fake_kfp.runs == {}


def test_conflicting_content_lengths_are_refused(endpoint):
    twice = head("10").replace("\r\n\r\n", "\r\nContent-Length: 12\r\n\r\n")
    answer, _ = exchange(endpoint, twice, b"0123456789")
    assert status_of(answer) == 400 and b"conflicting values" in answer


def test_a_client_that_stalls_is_dropped_and_others_are_served(endpoint, fake_kfp):
    add_schedule(fake_kfp, "flights-delay-nightly")
    outcomes: dict[str, Any] = {}

    def stall(name: str, head_text: str) -> None:
        outcomes[name] = exchange(endpoint, head_text)

    stalled = [
        # Headers of a 200-byte body, then nothing.
        threading.Thread(target=stall, args=("in the body", head("200"))),
        # Half a request line, then nothing.
        threading.Thread(target=stall, args=("in the head", "POST /al")),
    ]
    for thread in stalled:
        thread.start()
    time.sleep(0.1)
    # Meanwhile the endpoint answers others.
    host, port = endpoint
    with urllib.request.urlopen(f"http://{host}:{port}/healthz", timeout=2) as health:
        assert health.status == 200
    for thread in stalled:
        thread.join(ANSWER_WITHIN_S + 1)
    body_answer, body_took = outcomes["in the body"]
    assert status_of(body_answer) == 408 and b"did not arrive within 0.5 s" in body_answer
    head_answer, head_took = outcomes["in the head"]
    assert head_answer == b""  # dropped: nothing to answer to
    for took in (body_took, head_took):
        assert REQUEST_TIMEOUT_S - 0.1 <= took < REQUEST_TIMEOUT_S + 2.0, took
    assert fake_kfp.runs == {}


def test_a_malformed_body_keeps_the_connection_usable(endpoint):
    """A 400 for a body read whole: the next request on the same connection is answered."""
    host, port = endpoint
    with socket.create_connection((host, port), timeout=ANSWER_WITHIN_S) as conn:
        conn.sendall(head("9").encode() + b"{not json")
        conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: receiver\r\nConnection: close\r\n\r\n")
        received = b""
        while chunk := conn.recv(65536):
            received += chunk
    assert received.count(b"HTTP/1.1 ") == 2 and b'{"status": "ok"}' in received


def test_two_notifications_for_one_model_at_once_start_one_run(endpoint, fake_kfp):
    """The KFP API takes its time to create a run: without the receiver's lock, both requests
    would list no running run and both would create one."""
    add_schedule(fake_kfp, "flights-delay-nightly")
    fake_kfp.create_run_delay_s = 0.5
    host, port = endpoint
    barrier = threading.Barrier(2)
    answers: list[dict[str, Any]] = []

    def deliver(fingerprint: str) -> None:
        body = json.dumps(notification(drift_alert(fingerprint=fingerprint))).encode()
        request = urllib.request.Request(
            f"http://{host}:{port}/alerts",
            data=body,
            method="POST",
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"},
        )
        barrier.wait()
        with urllib.request.urlopen(request, timeout=10) as answer:
            answers.append(json.loads(answer.read()))

    threads = [threading.Thread(target=deliver, args=(f,)) for f in ("aaaa000011112222", "bbbb000011112222")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(15)
    outcomes = sorted(a["decisions"][0]["decision"] for a in answers)
    assert outcomes == sorted([STARTED, SKIPPED])
    assert len(fake_kfp.runs) == 1
    skipped = next(a["decisions"][0] for a in answers if a["decisions"][0]["decision"] == SKIPPED)
    assert "still running" in skipped["reason"]


def test_the_default_request_timeout_is_ten_seconds(tmp_path, fake_kfp):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    receiver = Receiver(KfpRetraining(fake_kfp.url, namespaces=[NAMESPACE]), datetime.timedelta(hours=6))
    server = AlertReceiverServer(receiver, str(token_file), "127.0.0.1", 0)
    try:
        assert server.request_timeout_s == 10.0
    finally:
        server.server_close()


def test_deeply_nested_json_is_a_400_not_a_dropped_connection(endpoint):
    nested = b"[" * 100_000 + b"]" * 100_000
    answer, _ = exchange(endpoint, head(str(len(nested))), nested)
    assert status_of(answer) == 400 and b"nested too deeply" in answer


def _deliver_all(address: tuple[str, int], bodies: list[bytes], concurrency: int) -> list[Any]:
    """Posts every body, ``concurrency`` at a time, each on its own connection; each result is
    the answer's status and JSON, or the exception a reset connection raised."""
    import concurrent.futures
    import urllib.error

    host, port = address

    def post(body: bytes) -> Any:
        request = urllib.request.Request(
            f"http://{host}:{port}/alerts",
            data=body,
            method="POST",
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"},
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                return answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as err:
            return err.code, None
        except OSError as err:  # a reset or refused connection
            return err

    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        return list(pool.map(post, bodies))


def _burst(fake_kfp: FakeKfpServer, endpoint: tuple[str, int], notifications: int, concurrency: int) -> None:
    """``notifications`` for 10 models, ``concurrency`` at a time, against a healthy KFP API: no
    connection reset, no 5xx, and exactly one run per model, as the decisions say."""
    models = [f"model-{i}" for i in range(10)]
    for model in models:
        add_schedule(fake_kfp, f"{model}-nightly", serving_name=model)
    bodies = [
        json.dumps(notification(drift_alert(service=models[i % 10], fingerprint=f"{i:016x}"))).encode()
        for i in range(notifications)
    ]
    results = _deliver_all(endpoint, bodies, concurrency=concurrency)
    resets = [r for r in results if isinstance(r, Exception)]
    assert resets == [] and all(status == 200 for status, _ in results), results[:3]
    decisions = [d for _, answer in results for d in answer["decisions"]]
    started = [d for d in decisions if d["decision"] == STARTED]
    assert len(decisions) == notifications and len(started) == 10 == len(fake_kfp.runs)
    assert sorted(d["inference_service"] for d in started) == models


def test_a_burst_of_notifications_is_answered_whole_subset(endpoint, fake_kfp):
    _burst(fake_kfp, endpoint, notifications=40, concurrency=20)


@pytest.mark.slow
def test_a_burst_of_notifications_is_answered_whole(endpoint, fake_kfp):
    _burst(fake_kfp, endpoint, notifications=200, concurrency=50)
