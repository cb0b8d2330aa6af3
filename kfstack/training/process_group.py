"""Runs a training job's replicas as local processes, the way the training-operator runs pods.

One *attempt* starts every replica with its own env (built per attempt, so each gets a fresh
port), streams each replica's output to this process prefixed with its name and keeps it in
``<logs_dir>/attempt-<k>/<name>.log``. When any replica exits non-zero the others are stopped
(SIGTERM, then SIGKILL after a grace period) and, like ``restartPolicy: OnFailure`` on a
cluster, the whole group starts again -- the trainers resume from their latest checkpoint -- up
to ``max_restarts`` times. After that :class:`TrainingFailedError` carries the failed replica's
name, exit code and log tail.
"""

from __future__ import annotations

import collections
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
from typing import TextIO

from kfstack.errors import TrainingFailedError

logger = logging.getLogger(__name__)

LOG_TAIL_LINES = 40


@dataclasses.dataclass(frozen=True)
class ReplicaProcess:
    """One replica to start: a name (``master-0``, ``worker-1``), its argv and its extra env."""

    name: str
    argv: list[str]
    env: dict[str, str]


@dataclasses.dataclass
class GroupResult:
    """How the group finished: attempts used and each replica's log of the last attempt."""

    attempts: int
    logs: dict[str, str]

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


def free_port() -> int:
    """A TCP port on the loopback interface that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pump(process: subprocess.Popen, name: str, log_path: str, tail: collections.deque, out: TextIO) -> None:
    with open(log_path, "w", encoding="utf-8") as log:
        for line in process.stdout:
            log.write(line)
            log.flush()
            tail.append(line.rstrip("\n"))
            out.write(f"[{name}] {line}" if line.endswith("\n") else f"[{name}] {line}\n")
            out.flush()


def _start(replica: ReplicaProcess, attempt_dir: str, out: TextIO) -> _Running:
    log_path = os.path.join(attempt_dir, f"{replica.name}.log")
    process = subprocess.Popen(
        replica.argv,
        env={**os.environ, **replica.env, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
    )
    tail: collections.deque = collections.deque(maxlen=LOG_TAIL_LINES)
    reader = threading.Thread(target=_pump, args=(process, replica.name, log_path, tail, out), daemon=True)
    reader.start()
    return _Running(replica, process, log_path, tail, reader)


def _stop(running: list[_Running], grace_seconds: float) -> None:
    alive = [r for r in running if r.process.poll() is None]
    for r in alive:
        r.process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace_seconds
    for r in alive:
        try:
            r.process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            r.process.kill()
            r.process.wait()
    for r in running:
        r.reader.join(timeout=5)


def _describe_exit(code: int) -> str:
    if code < 0:
        return f"killed by {signal.Signals(-code).name}"
    return f"exit code {code}"


def run_process_group(
    build_replicas: Callable[[int], list[ReplicaProcess]],
    logs_dir: str,
    max_restarts: int,
    on_group_started: Callable[[int, list[subprocess.Popen]], None] | None = None,
    grace_seconds: float = 10.0,
    poll_seconds: float = 0.1,
    out: TextIO | None = None,
) -> GroupResult:
    """Runs attempts until every replica exits 0 or the restarts are used up.

    Args:
        build_replicas: Attempt number (1-based) -> the replicas to start.
        logs_dir: Local directory for ``attempt-<k>/<name>.log``.
        max_restarts: Whole-group restarts after a failure (0: fail on the first one).
        on_group_started: Called with the attempt number and the started processes (tests use
            it to kill a replica mid-training).
        grace_seconds: Time between SIGTERM and SIGKILL when stopping the others.
        poll_seconds: How often exit codes are checked.
        out: Where the prefixed live output goes (default: stdout).

    Raises:
        TrainingFailedError: The last allowed attempt failed; names the replica and its log tail.
    """
    out = out or sys.stdout
    attempt = 0
    while True:
        attempt += 1
        attempt_dir = os.path.join(logs_dir, f"attempt-{attempt}")
        os.makedirs(attempt_dir, exist_ok=True)
        replicas = build_replicas(attempt)
        logger.info("attempt %d: starting %s", attempt, ", ".join(r.name for r in replicas))
        running = [_start(r, attempt_dir, out) for r in replicas]
        failed: _Running | None = None
        try:
            if on_group_started is not None:
                on_group_started(attempt, [r.process for r in running])
            while True:
                codes = [r.process.poll() for r in running]
                failed = next((r for r, c in zip(running, codes) if c not in (None, 0)), None)
                if failed is not None or all(c == 0 for c in codes):
                    break
                time.sleep(poll_seconds)
        finally:
            # Also on KeyboardInterrupt / SIGTERM of this launcher: never orphan a replica.
            _stop(running, grace_seconds)
        logs = {r.replica.name: r.log_path for r in running}
        if failed is None:
            return GroupResult(attempts=attempt, logs=logs)
        reason = _describe_exit(failed.process.returncode)
        tail = "\n".join(failed.tail)
        if attempt > max_restarts:
            raise TrainingFailedError(
                f"{failed.replica.name} failed ({reason}) on attempt {attempt} of "
                f"{max_restarts + 1}; the other replicas were stopped. Last lines of its log "
                f"({failed.log_path}):\n{tail}"
            )
        logger.warning(
            "attempt %d: %s failed (%s); restarting the group from the latest checkpoint "
            "(%d of %d restarts)", attempt, failed.replica.name, reason, attempt, max_restarts,
        )
