"""The embedded tracking store: MLflow's tracking server on loopback over a SQLite file under the
pipeline root, for as long as a run (or ``kfstack ui``) lasts.

Why a server and not the SQLite file itself: an embedded run's tasks, training ranks and parallel
tuning trials log at the same time, from many processes. SQLite takes one writer at a time and
MLflow's SQL store retries a locked database for a while, then fails; one server process owning
the file puts every write in one queue (its single worker), and every process reaches it the way a
cluster's pods reach a team's server (``http://``), so the code that logs is the same on both
platforms. Artifacts go through the same server (``--serve-artifacts``) into a folder beside the
database.

The store outlives its runs: ``kfstack ui`` opens it later, and ``kfstack clean`` removes a run's
entries with its directory (:func:`delete_runs`).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence

STORE_DIR = "mlflow"
"""The store's folder under the pipeline root (``kfstack clean`` never removes it whole)."""
DATABASE = "mlflow.db"
ARTIFACTS = "artifacts"
SERVER_LOG = "server.log"
UI_FILE = "ui.json"
"""Written by ``kfstack ui`` while its server runs: a run under the same root tracks through it
rather than start a server of its own (seconds saved; :func:`open_ui`)."""

START_TIMEOUT_SECONDS = 20.0
"""How long a run waits for its server to answer before it goes on without tracking (the
first start over a new store creates its tables: seconds, on a slow machine)."""
STOP_GRACE_SECONDS = 5.0
JOB_EXECUTION_ENV = "MLFLOW_SERVER_ENABLE_JOB_EXECUTION"
"""MLflow's own switch for its server's background jobs (MLflow 3.5 and later; on by default)."""

SERVER_INSTALL_HINT = "pip install 'kfstack[mlflow]'"


def store_dir(pipeline_root: str) -> str:
    return os.path.abspath(os.path.join(pipeline_root, STORE_DIR))


def database(pipeline_root: str) -> str:
    return os.path.join(store_dir(pipeline_root), DATABASE)


def backend_uri(pipeline_root: str) -> str:
    """The store's database as MLflow names a SQLite store (an absolute path: four slashes)."""
    return "sqlite:///" + database(pipeline_root)


def server_installed() -> bool:
    """Whether the full MLflow (its server and UI) is installed, not the client alone: the
    ``mlflow-skinny`` distribution holds the ``mlflow`` package without the server's parts."""
    from importlib import metadata

    try:
        metadata.distribution("mlflow")
    except metadata.PackageNotFoundError:
        return False
    return True


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class ServerNotReady(RuntimeError):
    """The server did not answer within its start timeout, or exited (its log says why)."""


class LocalServer:
    """An MLflow tracking server over the store under ``pipeline_root``, on loopback.

    Args:
        pipeline_root: Where the store is (``<pipeline_root>/mlflow``), made if absent.
        port: The port to listen on; 0 picks a free one.
        host: Loopback by default: the store is the person's, not the network's.
    """

    def __init__(self, pipeline_root: str, port: int = 0, host: str = "127.0.0.1") -> None:
        self.pipeline_root = pipeline_root
        self.root = store_dir(pipeline_root)
        self.host, self.port = host, port or free_port()
        self.uri = f"http://{host}:{self.port}"
        self.log_path = os.path.join(self.root, SERVER_LOG)
        self.process: subprocess.Popen[bytes] | None = None

    def command(self) -> list[str]:
        # One worker: the SQLite file has one writer, and the requests of a run are few.
        return [
            sys.executable,
            "-m",
            "mlflow",
            "server",
            "--backend-store-uri",
            backend_uri(self.pipeline_root),
            "--artifacts-destination",
            os.path.join(self.root, ARTIFACTS),
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--workers",
            "1",
        ]

    def environment(self) -> dict[str, str]:
        """The server's environment: this process's, with MLflow's job execution off unless it
        says otherwise. Those jobs (GenAI evaluation, trace roll-ups) are nothing a pipeline run
        logs, and they cost a runner and seven consumer processes, each importing MLflow: about
        half the server's start (measured: 10 processes and 16.5 s of CPU to answer, 2 and 8.6 s
        without)."""
        return {**os.environ, JOB_EXECUTION_ENV: os.environ.get(JOB_EXECUTION_ENV, "false")}

    def start(self) -> None:
        """Starts the server without waiting for it (:meth:`wait_ready` waits)."""
        os.makedirs(os.path.join(self.root, ARTIFACTS), exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                self.command(),
                env=self.environment(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # Ctrl-C reaches the run, which stops the server last
            )

    def wait_ready(self, timeout: float = START_TIMEOUT_SECONDS) -> None:
        """Returns once ``/health`` answers; raises :class:`ServerNotReady` after ``timeout``
        seconds, or as soon as the server exits."""
        deadline = time.monotonic() + timeout
        while True:
            if self.process is not None and self.process.poll() is not None:
                raise ServerNotReady(
                    f"the tracking server exited ({self.process.returncode}); see {self.log_path}"
                )
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(f"{self.uri}/health", timeout=1) as answer,
            ):
                if answer.status == 200:
                    return
            if time.monotonic() >= deadline:
                raise ServerNotReady(
                    f"the tracking server did not answer in {timeout:.0f} s; see {self.log_path}"
                )
            time.sleep(0.1)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, 15)
        try:
            self.process.wait(STOP_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, 9)
            self.process.wait()

    @contextlib.contextmanager
    def running(self) -> Iterator[LocalServer]:
        """Started and stopped around the block (not waited for: :meth:`wait_ready`)."""
        self.start()
        try:
            yield self
        finally:
            self.stop()


def open_ui(pipeline_root: str) -> str:
    """The URI of a ``kfstack ui`` serving the store under ``pipeline_root`` now, or ``""``."""
    try:
        with open(os.path.join(store_dir(pipeline_root), UI_FILE), encoding="utf-8") as f:
            advertised = json.load(f)
        os.kill(int(advertised["pid"]), 0)
        with urllib.request.urlopen(f"{advertised['uri']}/health", timeout=1) as answer:
            return str(advertised["uri"]) if answer.status == 200 else ""
    except (OSError, ValueError, KeyError, TypeError):
        return ""


@contextlib.contextmanager
def advertised(server: LocalServer) -> Iterator[None]:
    """The UI file naming ``server`` while the block lasts (:data:`UI_FILE`)."""
    assert server.process is not None
    path = os.path.join(server.root, UI_FILE)
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"uri": server.uri, "pid": server.process.pid}, f)
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            os.remove(path)


def delete_runs(pipeline_root: str, run_dirs: Sequence[str]) -> int:
    """Removes from the store every MLflow run tagged with one of ``run_dirs`` (a run's parent,
    its tasks and its trials all carry the tag) with their artifacts, for good: MLflow's delete,
    then its garbage collection (``mlflow gc``), through a server of the store's own (the
    artifacts it proxied are deleted through it). Returns how many runs went; 0 where there is
    no store or no full MLflow to open it.

    Raises:
        ServerNotReady: The store's server did not start (nothing was deleted).
        subprocess.CalledProcessError: ``mlflow gc`` failed (the runs are deleted, not yet
            collected: a later clean collects them).
    """
    from kfstack.tracking.client import tag_filter
    from kfstack.tracking.runs import RUN_DIR_TAG

    if not run_dirs or not os.path.isfile(database(pipeline_root)) or not server_installed():
        return 0
    server = LocalServer(pipeline_root)
    with server.running():
        server.wait_ready()
        from mlflow.tracking import MlflowClient

        client = MlflowClient(tracking_uri=server.uri)
        experiments = [experiment.experiment_id for experiment in client.search_experiments()]
        doomed: list[str] = []
        for run_dir in run_dirs:
            query = tag_filter({RUN_DIR_TAG: run_dir})
            doomed += [run.info.run_id for run in client.search_runs(experiments, query, max_results=50000)]
        for run_id in doomed:
            client.delete_run(run_id)
        if doomed:
            gc = [sys.executable, "-m", "mlflow", "gc", "--backend-store-uri", backend_uri(pipeline_root)]
            gc += ["--tracking-uri", server.uri, "--run-ids", ",".join(doomed)]
            subprocess.run(gc, check=True, capture_output=True)
    return len(doomed)
