"""Runs a training job's replicas as local processes, the way the training-operator runs pods.

One *attempt* starts every replica with its own env (built per attempt, so each gets a fresh
port), streams each replica's output to this process prefixed ``[rank i]`` and keeps it in
``<logs_dir>/attempt-<k>/rank-<i>.log``. When any replica exits non-zero the others are stopped
(SIGTERM, then SIGKILL after a grace period) and, like ``restartPolicy: OnFailure`` on a
cluster, the whole group starts again -- the trainers resume from their latest checkpoint -- up
to ``max_restarts`` times. After that :class:`TrainingFailedError` carries the failed replica's
rank, role, exit code and log tail.

A replica may start processes of its own (a TrainJob node is torchrun, whose worker runs in a
session of its own): they are tracked while the replica runs and stopped with it, as a pod's
processes all end with the pod.

Each replica gets ``OMP_NUM_THREADS`` (the cores split evenly over the replicas unless the
caller or the replica's env says otherwise): N processes that each start one intra-op thread per
core would oversubscribe the machine N times over.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

import psutil

from kfstack.cancellation import sigterm_raises
from kfstack.errors import TrainingFailedError

logger = logging.getLogger(__name__)

LOG_TAIL_LINES = 40
# How often the processes each replica started are looked up (a /proc walk).
TRACK_SECONDS = 1.0
# SIGTERM to SIGKILL when stopping replicas. Shorter than the embedded runner's grace for a
# whole task (kfstack.app.local_run): a cancelled launcher has stopped every replica, and the
# processes they started, before the runner would SIGKILL the launcher itself.
STOP_GRACE_SECONDS = 5.0
# Local replicas reach each other here; the ports are picked free per attempt.
LOOPBACK = "127.0.0.1"


@dataclasses.dataclass(frozen=True)
class ReplicaProcess:
    """One replica to start.

    Attributes:
        rank: Its rank in the group; names its log file and output prefix.
        argv: The command line.
        env: Variables added to this process's environment (e.g. the operator's contract).
        role: What the operator would call its pod (``master-0``, ``worker-1``); shown in errors.
    """

    rank: int
    argv: list[str]
    env: dict[str, str]
    role: str = ""

    @property
    def label(self) -> str:
        return f"rank {self.rank}" + (f" ({self.role})" if self.role else "")


@dataclasses.dataclass(frozen=True)
class ReplicaSet:
    """A framework's local replicas: how to start them per attempt, and how the group ends.

    Attributes:
        build: Attempt number (1-based) -> the replicas to start.
        done_when_exits: Position of the replica whose successful exit completes the group (a
            TFJob's chief); ``None``: every replica must exit 0.
        details: What describes the group in the step's reference (world size, topology).
    """

    build: Callable[[int], list[ReplicaProcess]]
    done_when_exits: int | None = None
    details: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class GroupResult:
    """How the group finished.

    Attributes:
        attempts: Attempts started (1 when nothing failed).
        logs: Rank -> its log file in the last (successful) attempt.
        attempt_logs: Attempt number -> rank -> log file, for every attempt.
    """

    attempts: int
    logs: dict[int, str]
    attempt_logs: dict[int, dict[int, str]] = dataclasses.field(default_factory=dict)
    # The caller asked the group to stop (an early-stopped tuning trial) and it was stopped.
    stopped: bool = False

    @property
    def restarts(self) -> int:
        return self.attempts - 1


@dataclasses.dataclass
class _Running:
    replica: ReplicaProcess
    process: subprocess.Popen
    log_path: str
    tail: collections.deque
    reader: threading.Thread
    # When the replica's output ended (it exited); picks the first of several failures.
    ended_at: list[float] = dataclasses.field(default_factory=list)
    # The replica as psutil sees it, looked up once at start (a pid reused later by another
    # process is then not mistaken for it), and the processes it started, as last seen: they
    # are stopped even when the replica itself died first.
    handle: psutil.Process | None = None
    descendants: dict[int, psutil.Process] = dataclasses.field(default_factory=dict)

    def track_descendants(self) -> None:
        if self.handle is None:
            return
        try:
            children = self.handle.children(recursive=True)
        except psutil.Error:  # the replica already exited
            return
        self.descendants.update({child.pid: child for child in children})

    def live_descendants(self) -> list[psutil.Process]:
        return [child for child in self.descendants.values() if _alive(child)]


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def free_port() -> int:
    """A TCP port on the loopback interface that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def default_threads(processes: int) -> int:
    """Intra-op threads per process so that ``processes`` of them share the cores evenly."""
    return max(1, (os.cpu_count() or 1) // max(1, processes))


def _pump(
    process: subprocess.Popen,
    rank: int,
    log_path: str,
    tail: collections.deque,
    out: TextIO,
    ended_at: list[float],
    on_output: Callable[[int, str], None] | None,
) -> None:
    prefix = f"[rank {rank}] "
    assert process.stdout is not None  # started with stdout=PIPE
    with open(log_path, "w", encoding="utf-8") as log:
        for line in process.stdout:
            log.write(line)
            log.flush()
            tail.append(line.rstrip("\n"))
            out.write(prefix + line if line.endswith("\n") else prefix + line + "\n")
            out.flush()
            if on_output is not None:
                on_output(rank, line.rstrip("\n"))
    ended_at.append(time.monotonic())


def _start(
    replica: ReplicaProcess,
    attempt_dir: str,
    out: TextIO,
    threads: int,
    on_output: Callable[[int, str], None] | None = None,
) -> _Running:
    log_path = os.path.join(attempt_dir, f"rank-{replica.rank}.log")
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), **replica.env, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        replica.argv,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
    )
    tail: collections.deque = collections.deque(maxlen=LOG_TAIL_LINES)
    ended_at: list[float] = []
    reader = threading.Thread(
        target=_pump, args=(process, replica.rank, log_path, tail, out, ended_at, on_output), daemon=True
    )
    reader.start()
    try:
        handle: psutil.Process | None = psutil.Process(process.pid)
    except psutil.Error:  # already gone: it started nothing that could outlive it
        handle = None
    return _Running(replica, process, log_path, tail, reader, ended_at, handle=handle)


def _stop(running: list[_Running], grace_seconds: float) -> None:
    """SIGTERM to every live replica and the processes it started; SIGKILL after the grace."""
    for r in running:
        r.track_descendants()
    alive = [r for r in running if r.process.poll() is None]
    children = [child for r in running for child in r.live_descendants()]
    for r in alive:
        r.process.send_signal(signal.SIGTERM)
    for child in children:
        with contextlib.suppress(psutil.Error):
            child.terminate()
    deadline = time.monotonic() + grace_seconds
    for r in alive:
        try:
            r.process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            r.process.kill()
            r.process.wait()
    _, survivors = psutil.wait_procs(children, timeout=max(0.0, deadline - time.monotonic()))
    for child in survivors:
        with contextlib.suppress(psutil.Error):
            child.kill()
    for r in running:
        r.reader.join(timeout=5)


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def _first_failure(running: list[_Running]) -> _Running | None:
    """The replica that failed first: the others often fail *because* of it (lost peer)."""
    failed = [r for r in running if r.process.poll() not in (None, 0)]
    if not failed:
        return None
    # The peers of a dead rank notice within moments; give their exits time to be recorded
    # so that the root cause, not a "connection reset" follower, is reported.
    for r in failed:
        r.reader.join(timeout=2)
    return min(failed, key=lambda r: r.ended_at[0] if r.ended_at else float("inf"))


def run_process_group(
    build_replicas: Callable[[int], list[ReplicaProcess]],
    logs_dir: str,
    max_restarts: int,
    on_group_started: Callable[[int, list[subprocess.Popen]], None] | None = None,
    threads_per_process: int | None = None,
    done_when_exits: int | None = None,
    grace_seconds: float = STOP_GRACE_SECONDS,
    poll_seconds: float = 0.05,
    out: TextIO | None = None,
    on_output: Callable[[int, str], None] | None = None,
    stop: threading.Event | None = None,
) -> GroupResult:
    """Runs attempts until every replica exits 0 or the restarts are used up.

    Args:
        build_replicas: Attempt number (1-based) -> the replicas to start (a fresh env per
            attempt, e.g. a new free port, since the old one may linger in TIME_WAIT).
        logs_dir: Local directory for ``attempt-<k>/rank-<i>.log``.
        max_restarts: Whole-group restarts after a failure (0: fail on the first one).
        on_group_started: Called with the attempt number and the started processes, in the
            order ``build_replicas`` returned them (tests use it to kill a replica mid-run).
        threads_per_process: ``OMP_NUM_THREADS`` of each replica unless its own env sets it;
            default: the cores split evenly (:func:`default_threads`).
        grace_seconds: Time between SIGTERM and SIGKILL when stopping the others.
        poll_seconds: How often exit codes are checked.
        out: Where the prefixed live output goes (default: stdout).
        done_when_exits: Position (in ``build_replicas``' list) of the replica whose successful
            exit completes the group, the others then being
            stopped -- a TFJob's chief, whose parameter servers and workers serve until the job
            ends. Default: every replica must exit 0.
        on_output: Called with (rank, line) for every line a replica prints, from the thread
            reading that replica (a tuning trial watches rank 0's metric lines).
        stop: Once set, the group is stopped and the run ends with ``stopped=True`` (no restart):
            what Katib's collector does to an early-stopped trial.

    Returns:
        Attempts used and the log file of every rank.

    Raises:
        TrainingFailedError: The last allowed attempt failed; names the rank, its exit code and
            the tail of its log.
        CancelledError: This process got SIGTERM; every replica was stopped first.
    """
    out = out or sys.stdout
    attempt_logs: dict[int, dict[int, str]] = {}
    attempt = 0
    while True:
        attempt += 1
        attempt_dir = os.path.join(logs_dir, f"attempt-{attempt}")
        os.makedirs(attempt_dir, exist_ok=True)
        replicas = build_replicas(attempt)
        threads = threads_per_process or default_threads(len(replicas))
        logger.info("attempt %d: starting %s", attempt, ", ".join(r.label for r in replicas))
        running: list[_Running] = []
        failed: _Running | None = None
        with sigterm_raises():
            try:
                running.extend(_start(r, attempt_dir, out, threads, on_output) for r in replicas)
                if on_group_started is not None:
                    on_group_started(attempt, [r.process for r in running])
                tracked_at = 0.0
                while True:
                    if stop is not None and stop.is_set():
                        break
                    if time.monotonic() - tracked_at > TRACK_SECONDS:
                        for r in running:
                            r.track_descendants()
                        tracked_at = time.monotonic()
                    codes = [r.process.poll() for r in running]
                    if any(c not in (None, 0) for c in codes):
                        failed = _first_failure(running)
                        break
                    if all(c == 0 for c in codes) or (
                        done_when_exits is not None and codes[done_when_exits] == 0
                    ):
                        break
                    time.sleep(poll_seconds)
            finally:
                # Also on KeyboardInterrupt / SIGTERM of this launcher: never orphan a replica.
                _stop(running, grace_seconds)
        attempt_logs[attempt] = {r.replica.rank: r.log_path for r in running}
        if stop is not None and stop.is_set():
            return GroupResult(attempt, attempt_logs[attempt], attempt_logs, stopped=True)
        if failed is None:
            return GroupResult(attempts=attempt, logs=attempt_logs[attempt], attempt_logs=attempt_logs)
        reason = _describe_exit(failed.process.returncode)
        tail = "\n".join(failed.tail)
        if attempt > max_restarts:
            raise TrainingFailedError(
                f"{failed.replica.label} failed ({reason}) on attempt {attempt} of "
                f"{max_restarts + 1}; the other ranks were stopped. Last lines of its log "
                f"({failed.log_path}):\n{tail}"
            )
        logger.warning(
            "attempt %d: %s failed (%s); restarting the group from the latest checkpoint (restart %d of %d)",
            attempt,
            failed.replica.label,
            reason,
            attempt,
            max_restarts,
        )
