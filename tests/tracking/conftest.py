"""Tracking's tests run against real MLflow tracking servers on loopback (the embedded store's
own, :class:`kfstack.tracking.store.LocalServer`) and against servers that fail: a port that
refuses, a server that accepts and never answers."""

import os
import pathlib
import socket
import threading

import pytest

from kfstack.tracking.store import LocalServer, free_port

TEAM_CODE = pathlib.Path(__file__).parent / "team_code"


@pytest.fixture
def tracking_on(monkeypatch):
    """The suite runs without tracking (tests/conftest.py); these tests turn it on, with nothing
    of the outer environment's MLflow settings."""
    monkeypatch.delenv("KFSTACK_TRACKING", raising=False)
    for name in (
        "MLFLOW_TRACKING_URI",
        "MLFLOW_RUN_ID",
        "KFSTACK_MLFLOW_PARENT_RUN_ID",
        "KFSTACK_TRACKING_NOTICES",
    ):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A tracking server over a store of this module's."""
    local = LocalServer(str(tmp_path_factory.mktemp("store")))
    with local.running():
        local.wait_ready(timeout=120)  # the first start creates the store's tables
        yield local


@pytest.fixture
def client(server):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=server.uri)


@pytest.fixture
def refusing_uri():
    """Nothing listens there: every connection is refused at once."""
    return f"http://127.0.0.1:{free_port()}"


@pytest.fixture
def silent_uri():
    """A server that accepts every connection and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    thread.join()
    for connection in held:
        connection.close()
    listener.close()


@pytest.fixture
def team_code(monkeypatch):
    monkeypatch.syspath_prepend(str(TEAM_CODE))
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [str(TEAM_CODE), os.environ.get("PYTHONPATH")]))
    )
