"""Every model server kfstack runs, against clients that mean harm: each standard-format stand-in
and the flights predictor (a team's own ``kserve.Model`` on kfstack's server) as a real process on
loopback.

- a corpus of malformed requests (V1 and V2, grown from what broke servers before): none gets a
  5xx, each 4xx names what is wrong;
- a chunked body, which has no length to refuse it by, gets a 413 once its count passes the
  limit;
- a body that never comes gets a 408 at the deadline, and the in-flight gauge comes down;
- the server listens on loopback alone.
"""

from __future__ import annotations

import json
import socket
import time

import httpx
import psutil
import pytest

from kfstack.serving import local_services, standard_formats
from tests.serving import standard_models
from tests.serving.conftest import Predictor

FORMAT_SERVER = "kfstack.serving.format_server"
LIMITS = ("--max_body_bytes=200000", "--body_read_seconds=1")

# V1 bodies any V1 server must refuse with a 4xx (the matrix formats' width is 64 or 30).
V1_CORPUS: list[object] = [
    [],
    {},
    {"instances": None},
    {"instances": "rows"},
    {"instances": 7},
    {"instances": [1.0, 2.0]},
    {"instances": [[1.0, 2.0], [1.0]]},
    {"instances": [[]]},
    {"instances": [[[1.0]]]},
    {"instances": [["a"] * 64]},
    {"instances": [[None] * 64]},
    {"instances": [[{"x": 1}] * 64]},
    {"instances": [[1e400] * 64]},
    {"instances": [[True] * 65]},
    {"instances": [{"a": 1}]},
    {"inputs": [[1.0] * 64]},
    {"instances": [[1.0] * 100_000]},
]


def _v2(*tensors: dict, **body: object) -> dict:
    return {"inputs": list(tensors), **body}


def _tensor(name: str, shape: object, datatype: object, data: object, **more: object) -> dict:
    return {"name": name, "shape": shape, "datatype": datatype, "data": data, **more}


def v2_corpus(name: str, width: int, names_checked: bool) -> list[tuple[object, bool]]:
    """V2 bodies for a model whose input ``name`` takes rows of ``width`` numbers, each with
    whether the server must refuse it. Some are tolerated as KServe's own servers tolerate them:
    its sklearn and xgboost servers read the first input whatever its name (``names_checked``
    False), ignore an unknown requested output and a tensor's own parameters."""
    row = [0.5] * width
    return [
        ({}, True),
        ({"inputs": None}, True),
        ({"inputs": "x"}, True),
        (_v2(), True),
        (_v2({"name": name}), True),
        (_v2(_tensor(name, [2, width], "FP32", row)), True),  # shape says 2 rows, data holds 1
        (_v2(_tensor(name, [10**12, width], "FP32", row)), True),  # a huge shape claim
        (_v2(_tensor(name, [-2, width], "FP32", row)), True),
        (_v2(_tensor(name, ["a", width], "FP32", row)), True),
        (_v2(_tensor(name, [1, width], "FP99", row)), True),
        (_v2(_tensor(name, [1, width], "FP32", ["x"] * width)), True),
        (_v2(_tensor(name, [1, width], "BYTES", ["x"] * width)), True),
        (_v2(_tensor(name, [1, width], "FP32", [[0.5, 0.5], [0.5]])), True),
        (_v2(_tensor(name, [1, width + 1], "FP32", [0.5] * (width + 1))), True),
        (_v2(_tensor(name, [1, width], "FP32", [None] * width)), True),
        (
            _v2(
                _tensor(name, [1], "BYTES", ["x"]),
                _tensor("other", [1], "FP32", [float("nan")]),
                parameters={"content_type": "pd"},
            ),
            True,
        ),
        (_v2(_tensor("no-such-input", [1, width], "FP32", row)), names_checked),
        (_v2(_tensor(name, [1, width], "FP32", row), _tensor(name, [1, width], "FP32", row)), names_checked),
        (_v2(_tensor(name, [1, width], "FP32", row), parameters={"content_type": "pd"}), False),
        (_v2(_tensor(name, [1, width], "FP32", row, parameters={"content_type": "str"})), False),
        (_v2(_tensor(name, [1, width], "FP32", row), outputs=[{"name": "no-such-output"}]), False),
    ]


class _Servers:
    """The servers of this module, each started on first use and stopped at the end: key ->
    (server, V1 or not, its V2 input's name and width, whether it checks input names)."""

    def __init__(self, root, trained) -> None:
        self.root, self.trained = root, trained
        self.started: dict[str, Predictor] = {}

    def _model_dirs(self) -> dict[str, tuple[str, tuple[str, ...], dict]]:
        root = self.root
        if not (root / "repository").exists():
            sklearn_model = standard_models.sklearn_digits(str(root / "sklearn"))
            standard_models.onnx_digits(str(root / "onnx"), sklearn_model)
            standard_formats.triton_layout(str(root / "onnx"), "digits", str(root / "repository"))
            standard_models.xgboost_cancer(str(root / "xgboost"))
        formats = {"name": "digits", "module": FORMAT_SERVER}
        return {
            "sklearn": (str(root / "sklearn"), ("--model_format=sklearn",), formats),
            "xgboost": (str(root / "xgboost"), ("--model_format=xgboost",), {**formats, "name": "cancer"}),
            "onnx": (str(root / "repository"), ("--model_format=onnx",), formats),
            "flights": (self.trained["model"], (), {}),
        }

    def __getitem__(self, key: str) -> tuple[Predictor, bool, str, int, bool]:
        if key not in self.started:
            model_dir, extra, kwargs = self._model_dirs()[key]
            run_dir = str(self.root / f"run-{key}")
            self.started[key] = Predictor(model_dir, run_dir, *LIMITS, *extra, service=key, **kwargs)
        shape = {
            "sklearn": (True, "input-0", 64, False),
            "xgboost": (True, "input-0", 30, False),
            "onnx": (False, "pixels", 64, True),
            "flights": (True, "carrier", 1, True),
        }[key]
        return (self.started[key], *shape)


@pytest.fixture(scope="module")
def servers(tmp_path_factory, trained):
    """Each server of this module, started on first use (:class:`_Servers`)."""
    started = _Servers(tmp_path_factory.mktemp("hostile"), trained)
    try:
        yield started
    finally:
        for server in started.started.values():
            server.stop()


# Two servers by default (a stand-in of KServe's and a team's own kserve.Model), all four under
# slow: the framing, the deadline and the 400s of a matrix stand-in are shared code.
SOME = [*("sklearn", "flights"), *(pytest.param(key, marks=pytest.mark.slow) for key in ("xgboost", "onnx"))]


@pytest.mark.parametrize("key", SOME)
def test_no_malformed_request_gets_a_5xx(servers, key):
    server, v1, name, width, names_checked = servers[key]
    cases = v2_corpus(name, width, names_checked)
    # KServe's V1 reads "inputs" as it reads "instances": tolerated.
    v1_cases = [(body, "inputs" not in body) for body in V1_CORPUS if isinstance(body, dict)]
    v1_cases += [(body, True) for body in V1_CORPUS if not isinstance(body, dict)]
    if not v1:
        v1_cases = [({"instances": [[0.5] * width]}, True)]
    raw = [b"{not json", b"\xff\xfe", b"[" * 100_000 + b"]" * 100_000]  # nesting past any parser's depth
    bodies = [("v2", body, refuse) for body, refuse in cases] + [
        ("v1", body, refuse) for body, refuse in v1_cases
    ]
    bodies += [("v1", body, True) for body in raw] + [("v2", body, True) for body in raw]
    failures = []
    with httpx.Client(base_url=server.url, timeout=30) as client:
        for protocol, body, refuse in bodies:
            infer = f"/v2/models/{server.name}/infer"
            path = f"/v1/models/{server.name}:predict" if protocol == "v1" else infer
            content = body if isinstance(body, bytes) else json.dumps(body).encode()
            response = client.post(path, content=content, headers={"content-type": "application/json"})
            try:
                named = bool(response.json().get("error"))
            except (ValueError, AttributeError):
                named = False
            refused = 400 <= response.status_code < 500 and named
            if not (refused or (not refuse and response.status_code == 200)):
                failures.append((protocol, content[:100], response.status_code, response.text[:200]))
    assert failures == [], failures
    assert len(bodies) >= 25
    assert server.healthy()


def _rss(server) -> int:
    return psutil.Process(server.service.pid).memory_info().rss


@pytest.mark.parametrize("key", SOME)
def test_a_chunked_body_over_the_limit_is_refused_as_it_arrives(servers, key):
    server = servers[key][0]
    path = f"{server.url}/v2/models/{server.name}/infer"
    sent = 0

    def chunks():
        nonlocal sent
        for _ in range(200):  # 12.8 MB offered, 64 KB at a time, with no Content-Length
            sent += 65536
            yield b" " * 65536

    before = _rss(server)
    try:
        headers = {"content-type": "application/json"}
        response = httpx.post(path, content=chunks(), headers=headers, timeout=30)
        assert response.status_code == 413
        assert "more than the 200000 bytes allowed" in response.json()["error"]
    except (httpx.RemoteProtocolError, httpx.WriteError):
        pass  # the server answered and closed while the client was still sending: refused too
    assert sent < 12_800_000  # it stopped reading long before the end
    assert _rss(server) - before < 32 * 2**20
    assert server.healthy()


def _in_flight(server) -> float:
    for line in httpx.get(f"{server.url}/metrics").text.splitlines():
        if line.startswith("kfstack_predictor_requests_in_flight{") and 'protocol="v2"' in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


@pytest.mark.parametrize("key", SOME)
def test_a_body_that_never_comes_gets_a_408_and_leaves_the_queue(servers, key):
    server = servers[key][0]
    url = httpx.URL(server.url)
    head = (
        f"POST /v2/models/{server.name}/infer HTTP/1.1\r\nHost: {url.host}\r\n"
        "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
    )
    stalled = []
    try:
        for _ in range(8):
            client = socket.create_connection((url.host, url.port), timeout=10)
            client.sendall(head.encode())
            stalled.append(client)
        start = time.monotonic()
        answers = [client.recv(4096).decode() for client in stalled]  # each at its deadline
        assert all(answer.startswith("HTTP/1.1 408") for answer in answers), answers[0]
        assert time.monotonic() - start < 1 + 1  # the deadline, and a second
        assert _in_flight(server) == 0
    finally:
        for client in stalled:
            client.close()
    assert server.healthy()


@pytest.mark.parametrize("key", SOME)
def test_an_embedded_server_listens_on_loopback_alone(servers, key):
    server = servers[key][0]
    found = local_services.find_service(server.run_dir, server.service.name)
    assert found is not None
    connections = psutil.Process(server.service.pid).connections(kind="inet")  # psutil 5: KServe caps it
    listening = [c.laddr for c in connections if c.status == psutil.CONN_LISTEN]
    assert listening and all(address.ip == "127.0.0.1" for address in listening), listening


def test_a_refused_request_leaves_no_payload_in_the_log(servers):
    server = servers["sklearn"][0]
    marker = "hostile-payload-7f3a"
    response = httpx.post(
        f"{server.url}/v1/models/{server.name}:predict", json={"instances": [[marker] * 64]}, timeout=30
    )
    assert response.status_code == 400 and marker in response.json()["error"]  # the client is told
    with open(server.service.log_path, encoding="utf-8", errors="replace") as log:
        text = log.read()
    assert "request refused (400): malformed input" in text
    assert marker not in text and "Traceback" not in text


@pytest.mark.slow
def test_a_200_mib_chunked_body_grows_a_server_by_at_most_its_limit_and_32_mib(tmp_path):
    """At the default limit (16 MiB): the body is counted as it arrives and refused once past it,
    so the server's resident memory grows by the limit and the server's own overhead at most."""
    model_dir = tmp_path / "sklearn"
    standard_models.sklearn_digits(str(model_dir))
    server = Predictor(
        str(model_dir), str(tmp_path / "run"), "--model_format=sklearn", name="digits", module=FORMAT_SERVER
    )
    try:
        path = f"{server.url}/v2/models/digits/infer"
        warm = httpx.post(path, json={"inputs": []}, timeout=30)  # the first request's own allocations
        assert warm.status_code == 400
        before = _rss(server)
        peak = before
        sent = 0

        def chunks():
            nonlocal sent, peak
            for _ in range(200):
                sent += 2**20
                peak = max(peak, _rss(server))
                yield b" " * 2**20

        try:
            response = httpx.post(
                path, content=chunks(), headers={"content-type": "application/json"}, timeout=60
            )
            assert response.status_code == 413
        except (httpx.RemoteProtocolError, httpx.WriteError):
            pass  # answered and closed while the client still sent
        peak = max(peak, _rss(server))
        growth_mib = (peak - before) / 2**20
        print(f"sent {sent / 2**20:.0f} MiB; server RSS {before / 2**20:.0f} -> peak {peak / 2**20:.0f} MiB")
        assert growth_mib <= 16 + 32, growth_mib
        assert server.healthy()
    finally:
        server.stop()
