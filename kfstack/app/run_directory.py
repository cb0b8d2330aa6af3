"""Where an embedded run keeps what it leaves behind, and how old runs are removed.

One directory per run under the pipeline root (``runs/`` by default)::

    runs/<pipeline>-20261123-220942/
      .kfstack-run       marker: this directory is a run's (``kfstack clean`` removes only these),
                         with the pipeline and its arguments (``kfstack run --local --resume``)
      .kfstack-lock      locked (``flock``) by the process running the run, while it runs
      summary.json       the run summary, whatever the outcome
      logs/kfp.log       kfp.local's own output (executor inputs, task outputs)
      logs/<task>.log    each task's own output
      artifacts/         kfp.local's pipeline root: <pipeline>-<time>/<task>/<output>
      tmp/               $TMPDIR of every task process; removed when the run ends
      state/             what a step keeps to resume (the embedded tuner's trial journal)
      step-cache/        the cache entries of the steps this run computed (:mod:`kfstack.app.step_cache`)

Beside the runs, ``registry/`` is the embedded platform's model registry (which model serves,
and its history: :mod:`kfstack.serving.registry`), and ``alert-runs.jsonl`` the alert receiver's
record of which alert started which run: they outlive every run. They, and anything else under
the pipeline root without a marker (a user's file), are never touched by ``kfstack clean``.

**In use is never removed.** A run's process holds an exclusive lock on its ``.kfstack-lock``
from before its marker is written until it ends (the kernel drops it if the process dies); a
running run that reuses an ended run's outputs (the step cache) holds a shared lock of the
ended run's ``.kfstack-lock`` until it ends; and
a run directory is created under a shared lock of the root's ``.kfstack-root.lock``, which
``kfstack clean`` holds exclusively while it works: a clean never sees a run half made, and a
run that starts while a clean works waits for it. A process that starts a run in another process
(the alert receiver) hands the lock over with the file descriptor (:data:`LOCK_FD_ENV`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import re
import shutil
import time
from collections.abc import Iterator
from typing import Any

from kfstack.errors import UsageError

MARKER = ".kfstack-run"
LOCK = ".kfstack-lock"
ROOT_LOCK = ".kfstack-root.lock"
# Set by a process that created a run directory and starts the run in a child: the number of the
# inherited descriptor that holds the run's lock, which the child adopts (:meth:`RunDirectory.reopen`).
LOCK_FD_ENV = "KFSTACK_RUN_LOCK_FD"
# Why a run is in use (:meth:`RunDirectory.in_use`).
RUNNING = "running (a process holds its lock)"
REUSED = "a running run reuses its outputs (the step cache)"
# The run locks this process holds: run directory -> the descriptor holding it.
_HELD: dict[str, int] = {}
# The marker's "started": the run's start in local time (also the directory name's suffix).
STARTED_FORMAT = "%Y%m%d-%H%M%S"
SUMMARY_FILE = "summary.json"
KFP_LOG = "kfp"
REGISTRY_DIR = "registry"
# Beside the runs: which alert started which run (:mod:`kfstack.app.alert_receiver.embedded`).
ALERT_LEDGER = "alert-runs.jsonl"


@dataclasses.dataclass(frozen=True)
class RunDirectory:
    """The paths of one run's directory (see the module docstring)."""

    path: str

    @property
    def logs(self) -> str:
        return os.path.join(self.path, "logs")

    @property
    def artifacts(self) -> str:
        return os.path.join(self.path, "artifacts")

    @property
    def tmp(self) -> str:
        return os.path.join(self.path, "tmp")

    @property
    def registry(self) -> str:
        """The model registry of the runs beside this one (under the same pipeline root)."""
        return os.path.join(os.path.dirname(os.path.abspath(self.path)), REGISTRY_DIR)

    @property
    def summary(self) -> str:
        return os.path.join(self.path, SUMMARY_FILE)

    def log(self, task: str) -> str:
        """The log file of ``task`` (``kfp`` for kfp.local's own output)."""
        return os.path.join(self.logs, f"{task}.log")

    def progress_file(self, task: str) -> str:
        """Where ``task``'s processes append progress events (temporary, under ``tmp/``)."""
        return os.path.join(self.tmp, f"{task}.progress.jsonl")

    @classmethod
    def create(
        cls,
        pipeline_root: str,
        pipeline: str,
        clock: float | None = None,
        arguments: dict[str, Any] | None = None,
    ) -> RunDirectory:
        """A new, empty run directory ``<pipeline_root>/<pipeline>-<YYYYmmdd-HHMMSS>[-n]`` (a
        character other than a letter, digit, ``.``, ``_`` or ``-`` in ``pipeline`` as ``-``).

        Raises:
            UsageError: The pipeline root cannot be created or written.
        """
        stamp = time.strftime(STARTED_FORMAT, time.localtime(clock))
        # A pipeline named ``module:function`` names its folder without the colon: the run's name
        # becomes a model version and a file name, where a colon is refused.
        folder = re.sub(r"[^A-Za-z0-9._-]", "-", pipeline)
        try:
            os.makedirs(pipeline_root, exist_ok=True)
            with _root_locked(pipeline_root, exclusive=False):
                for attempt in range(1000):
                    name = f"{folder}-{stamp}" + (f"-{attempt}" if attempt else "")
                    try:
                        os.mkdir(os.path.join(pipeline_root, name))
                        break
                    except FileExistsError:
                        continue
                else:
                    raise UsageError(f"{pipeline_root}: no free run directory name for {folder}-{stamp}")
                run = cls(os.path.abspath(os.path.join(pipeline_root, name)))
                if not run._lock():
                    raise UsageError(f"{run.path}: locked by another process as it was made")
                with open(os.path.join(run.path, MARKER), "w", encoding="utf-8") as f:
                    json.dump({"pipeline": pipeline, "started": stamp, "arguments": arguments or {}}, f)
                for folder in (run.logs, run.artifacts, run.tmp):
                    os.mkdir(folder)
        except OSError as err:
            raise UsageError(f"cannot write to {pipeline_root}: {err.strerror or err}") from err
        return run

    def _lock(self) -> bool:
        """Takes the run's lock for this process; False when another holds it."""
        if self.path in _HELD:
            return True
        fd = os.open(os.path.join(self.path, LOCK), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        _HELD[self.path] = fd
        return True

    def _adopt_inherited_lock(self) -> bool:
        """The lock of this run held by a descriptor the starting process handed over
        (:data:`LOCK_FD_ENV`), now this process's; False when there is none."""
        try:
            fd = int(os.environ.pop(LOCK_FD_ENV, ""))
            held, ours = os.fstat(fd), os.stat(os.path.join(self.path, LOCK))
        except (ValueError, OSError):
            return False
        if (held.st_dev, held.st_ino) != (ours.st_dev, ours.st_ino):
            return False
        os.set_inheritable(fd, False)
        _HELD[self.path] = fd
        return True

    def lock_descriptor(self) -> int:
        """The descriptor holding this process's lock of the run, to hand to the process that
        runs it (``pass_fds``, and its number in :data:`LOCK_FD_ENV`).

        Raises:
            KeyError: This process holds no lock of the run.
        """
        return _HELD[self.path]

    def release(self) -> None:
        """Drops this process's lock of the run (the run ended, or another process has it)."""
        fd = _HELD.pop(self.path, None)
        if fd is not None:
            os.close(fd)

    def in_use(self) -> str | None:
        """Why the run is in use, or None: running (a process, this one included, holds its
        lock), or its outputs reused by a running run (:func:`hold_for_reuse`)."""
        if self.path in _HELD:
            return RUNNING
        try:
            fd = os.open(os.path.join(self.path, LOCK), os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return None  # made before runs were locked, or never started
        try:
            for probe, held in ((fcntl.LOCK_SH, RUNNING), (fcntl.LOCK_EX, REUSED)):
                try:
                    fcntl.flock(fd, probe | fcntl.LOCK_NB)
                except BlockingIOError:
                    return held
            return None
        finally:
            os.close(fd)

    def marker(self) -> dict[str, Any]:
        """The run's marker: its ``pipeline``, ``started`` (:data:`STARTED_FORMAT`) and
        ``arguments``.

        Raises:
            OSError, ValueError: No readable marker.
        """
        with open(os.path.join(self.path, MARKER), encoding="utf-8") as f:
            marker: dict[str, Any] = json.load(f)
        return marker

    def remove_tmp(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    @classmethod
    def reopen(cls, path: str) -> tuple[RunDirectory, str, dict[str, Any]]:
        """An earlier run's directory, to resume it: (the run, its pipeline, its arguments).

        Raises:
            UsageError: ``path`` is not a run directory.
        """
        run = cls(os.path.abspath(path))
        try:
            marker = run.marker()
        except (OSError, ValueError):
            raise UsageError(f"--resume {path}: not a run directory (no readable {MARKER})") from None
        if not (run._adopt_inherited_lock() or run._lock()):
            raise UsageError(
                f"--resume {path}: in use: running, or a running run reuses its outputs (another "
                f"process holds {LOCK})"
            )
        os.makedirs(run.tmp, exist_ok=True)
        return run, marker["pipeline"], dict(marker.get("arguments") or {})


@contextlib.contextmanager
def _root_locked(pipeline_root: str, exclusive: bool) -> Iterator[None]:
    """The pipeline root's lock: shared while a run directory is made, exclusive while a clean
    works (each waits for the other)."""
    fd = os.open(os.path.join(pipeline_root, ROOT_LOCK), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)


def hold_for_reuse(run: RunDirectory) -> int | None:
    """A shared lock of an ended run's lock file, for a running run that reuses its outputs
    (:mod:`kfstack.app.step_cache`): ``kfstack clean`` skips the run while the descriptor
    returned is open. None when the run is running (its outputs may not be final) or gone.

    Taken under the root's shared lock, so a clean at work either removed the run before (the
    outputs are found missing) or sees the hold.
    """
    pipeline_root = os.path.dirname(run.path)
    try:
        with _root_locked(pipeline_root, exclusive=False):
            fd = os.open(os.path.join(run.path, LOCK), os.O_RDONLY | os.O_CLOEXEC)
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                return None
    except OSError:
        return None
    return fd


def list_runs(pipeline_root: str) -> list[RunDirectory]:
    """The run directories under ``pipeline_root``, oldest first (by their marker's time); a
    symbolic link to one is not listed (:func:`clean_runs` says it skipped it)."""
    if not os.path.isdir(pipeline_root):
        return []
    runs = []
    for name in os.listdir(pipeline_root):
        run = RunDirectory(os.path.abspath(os.path.join(pipeline_root, name)))
        marker = os.path.join(run.path, MARKER)
        if not os.path.islink(run.path) and os.path.isfile(marker):
            runs.append((os.path.getmtime(marker), name, run))
    return [run for _, _, run in sorted(runs)]


@dataclasses.dataclass(frozen=True)
class Skipped:
    """What ``kfstack clean`` left, and why."""

    path: str
    reason: str


def clean_runs(
    pipeline_root: str, keep: int = 0, dry_run: bool = False, force: bool = False
) -> tuple[list[RunDirectory], list[Skipped]]:
    """Removes every run directory under ``pipeline_root`` but the newest ``keep`` and those in
    use: a running run (its lock held) is skipped unless ``force``. A symbolic link among them
    is never followed: skipped, or with ``force`` the link alone removed.

    Returns:
        The run directories removed (or that would be, with ``dry_run``), and what was skipped.

    Raises:
        UsageError: ``keep`` is negative.
    """
    if keep < 0:
        raise UsageError(f"--keep {keep}: expected a count >= 0")
    if not os.path.isdir(pipeline_root):
        return [], []
    try:
        with _root_locked(pipeline_root, exclusive=True):
            return _clean_locked(pipeline_root, keep, dry_run, force)
    except OSError as err:
        raise UsageError(f"cannot clean {pipeline_root}: {err.strerror or err} ({err.filename})") from None


def _clean_locked(
    pipeline_root: str, keep: int, dry_run: bool, force: bool
) -> tuple[list[RunDirectory], list[Skipped]]:
    """:func:`clean_runs`' work, under the root's exclusive lock."""
    removed: list[RunDirectory] = []
    skipped: list[Skipped] = []
    for name in sorted(os.listdir(pipeline_root)):
        path = os.path.join(pipeline_root, name)
        if os.path.islink(path) and os.path.isfile(os.path.join(path, MARKER)):
            if force:
                if not dry_run:
                    os.unlink(path)
                what = "the link would be removed" if dry_run else "the link removed"
                skipped.append(
                    Skipped(
                        path, f"a symbolic link to {os.path.realpath(path)}: {what}, not what it points to"
                    )
                )
            else:
                skipped.append(
                    Skipped(
                        path,
                        f"a symbolic link to {os.path.realpath(path)}: not followed "
                        "(--force removes the link alone)",
                    )
                )
    runs = list_runs(pipeline_root)
    for run in runs[: len(runs) - keep] if keep else runs:
        in_use = run.in_use()
        if in_use and not force:
            skipped.append(Skipped(run.path, f"{in_use}; --force removes it anyway"))
            continue
        if not dry_run:
            try:
                shutil.rmtree(run.path)
            except OSError as err:
                skipped.append(
                    Skipped(run.path, f"cannot be removed: {err.strerror or err} ({err.filename})")
                )
                continue
        removed.append(run)
    return removed, skipped
