"""Long-lived processes of an embedded run (model servers): started by one task, used by the
tasks after it, stopped with the run.

kfp.local runs each task in a process of its own that ends with the task, so a server a task
starts must belong to something that lives longer: the run. A task starts it with
:func:`start_service`: in a session of its own (a task's process group is stopped when the task
ends; the server must survive that), recorded in ``<run dir>/services/<name>.json`` *before*
it is awaited, so whatever happens next it is found. Later tasks find it with
:func:`find_service`. The runner calls :func:`stop_services` when the run ends, however it ends.
And should the runner itself be killed before it can (SIGKILL), each service watches its owner
(:func:`exit_with_owner`, the process named by :data:`OWNER_PID_ENV`) and stops itself when that
process is gone.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable

import psutil

from kfstack.errors import RunFailedError
from kfstack.serving.canary import answers
from kfstack.training.process_group import free_port

logger = logging.getLogger(__name__)

SERVICES_DIR = "services"
# The process whose end ends the services: the embedded runner (`kfstack run --local`).
OWNER_PID_ENV = "KFSTACK_RUN_OWNER_PID"
OWNER_POLL_SECONDS = 1.0
STOP_GRACE_SECONDS = 10.0


@dataclasses.dataclass(frozen=True)
class LocalService:
    """A running service of the run: its process, loopback port and log."""

    name: str
    pid: int
    port: int
    log_path: str
    # The process's start time: with the pid, what identifies it (a pid alone may be reused).
    started: float

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def _record_path(run_dir: str, name: str) -> str:
    return os.path.join(run_dir, SERVICES_DIR, f"{name}.json")


def start_service(
    run_dir: str,
    name: str,
    argv: Callable[[int], list[str]],
    ready_path: str,
    timeout_seconds: float = 120.0,
) -> LocalService:
    """Starts ``argv(port)`` on a free loopback port and waits until ``GET ready_path`` answers 200.

    Raises:
        RunFailedError: The process exited, or was not ready in time (it is stopped then); the
            message carries its log's tail.
    """
    os.makedirs(os.path.join(run_dir, SERVICES_DIR), exist_ok=True)
    stop_service(run_dir, name)  # a retried task starts its service again: never two
    port = free_port()
    log_path = os.path.join(run_dir, SERVICES_DIR, f"{name}.log")
    owner = os.environ.get(OWNER_PID_ENV) or str(os.getpid())
    with open(log_path, "a", encoding="utf-8") as log:
        process = subprocess.Popen(
            argv(port),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # outlives the task's process group
            env={**os.environ, OWNER_PID_ENV: owner},
        )
    try:
        started = psutil.Process(process.pid).create_time()
    except psutil.Error:  # exited at once; the poll below reports it
        started = 0.0
    service = LocalService(name=name, pid=process.pid, port=port, log_path=log_path, started=started)
    record = _record_path(run_dir, name)
    with open(f"{record}.partial", "w", encoding="utf-8") as f:
        json.dump(dataclasses.asdict(service), f)
    os.replace(f"{record}.partial", record)  # a reader sees a whole record or none
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RunFailedError(
                f"service {name} exited ({process.returncode}) while starting:\n{_tail(log_path)}"
            )
        if answers(f"{service.url}{ready_path}", timeout_seconds=2):
            return service
        time.sleep(0.2)
    stop_service(run_dir, name)
    raise RunFailedError(f"service {name} was not ready within {timeout_seconds:.0f}s:\n{_tail(log_path)}")


def _read(run_dir: str, name: str) -> LocalService | None:
    path = _record_path(run_dir, name)
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return LocalService(**json.load(f))


def _process(service: LocalService) -> psutil.Process | None:
    """The service's process, if it still runs: the same pid *and* start time."""
    try:
        process = psutil.Process(service.pid)
        if process.create_time() != service.started or process.status() == psutil.STATUS_ZOMBIE:
            return None
        return process
    except psutil.Error:
        return None


def find_service(run_dir: str, name: str) -> LocalService | None:
    """The run's service ``name`` if it is recorded and its process still runs."""
    service = _read(run_dir, name)
    return service if service is not None and _process(service) is not None else None


def stop_service(run_dir: str, name: str) -> bool:
    """Stops one service (SIGTERM, SIGKILL after the grace) and forgets it; True if it ran."""
    service = _read(run_dir, name)
    if service is None:
        return False
    process = _process(service)
    if process is not None:
        _terminate(process)
    os.remove(_record_path(run_dir, name))
    return process is not None


def stop_services(run_dir: str) -> list[str]:
    """Stops every service of the run; returns the names of those that were still running.
    A service that cannot be stopped is logged and the others are still stopped."""
    directory = os.path.join(run_dir, SERVICES_DIR)
    if not os.path.isdir(directory):
        return []
    stopped = []
    for name in sorted(n[: -len(".json")] for n in os.listdir(directory) if n.endswith(".json")):
        try:
            if stop_service(run_dir, name):
                stopped.append(name)
        except (OSError, ValueError, TypeError, psutil.Error) as err:  # a damaged record included
            logger.error("could not stop service %s of %s: %s", name, run_dir, err)
    return stopped


def _terminate(process: psutil.Process) -> None:
    """SIGTERM to the service's session (it leads its own: start_new_session), SIGKILL after
    the grace. Only a process that leads its own group is signalled as a group."""
    try:
        own_group = os.getpgid(process.pid) == process.pid
    except ProcessLookupError:
        return

    def send(sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, psutil.Error):
            if own_group:
                os.killpg(process.pid, sig)
            else:
                process.send_signal(sig)

    send(signal.SIGTERM)
    try:
        process.wait(STOP_GRACE_SECONDS)
    except psutil.TimeoutExpired:
        send(signal.SIGKILL)
        with contextlib.suppress(psutil.Error):
            process.wait(5)


def exit_with_owner(poll_seconds: float = OWNER_POLL_SECONDS) -> None:
    """In a service: SIGTERM this process once the owner (:data:`OWNER_PID_ENV`) is gone.

    A no-op without the variable (a server started by hand). The owner is identified by its pid
    and start time, so a reused pid does not keep the service alive.
    """
    owner = os.environ.get(OWNER_PID_ENV)
    if not owner:
        return
    try:
        watched = psutil.Process(int(owner))
        started = watched.create_time()
    except (psutil.Error, ValueError):
        os.kill(os.getpid(), signal.SIGTERM)
        return

    def watch() -> None:
        while True:
            time.sleep(poll_seconds)
            try:
                alive = watched.is_running() and watched.create_time() == started
            except psutil.Error:
                alive = False
            if not alive:
                os.kill(os.getpid(), signal.SIGTERM)
                return

    threading.Thread(target=watch, name="owner-watch", daemon=True).start()


def _tail(path: str, lines: int = 20) -> str:
    with open(path, encoding="utf-8", errors="replace") as f:
        return "".join(f.readlines()[-lines:])
