"""Progress of a running step, from inside the step to whoever watches the run.

A step reports where it is -- a Spark phase, a finished epoch; later a finished trial or a
canary step -- with :func:`report`. On the embedded platform ``kfstack run --local`` names a
file in ``KFSTACK_PROGRESS_FILE`` for the task it is running, every process of the task (the
trainer ranks included, they inherit the environment) appends JSON lines to it, and the run's
live console line follows them. Anywhere else (a pod on a cluster, a test) the variable is unset
and :func:`report` does nothing: progress is a view, never part of a step's contract, so a
failure to write it never fails the step.
"""

from __future__ import annotations

import dataclasses
import json
import os

PROGRESS_FILE_ENV = "KFSTACK_PROGRESS_FILE"


@dataclasses.dataclass(frozen=True)
class ProgressEvent:
    """One report: what the step is doing, and how far it is when that is countable.

    Attributes:
        activity: What is happening now, short (``"epoch"``, ``"spark: profile"``).
        completed: Units done (``2`` epochs), or None when not countable.
        total: Units in all, or None when unknown.
    """

    activity: str
    completed: int | None = None
    total: int | None = None

    def describe(self) -> str:
        """``epoch 2/4``, ``spark: profile (5/7)`` or just the activity."""
        if self.completed is None:
            return self.activity
        count = f"{self.completed}/{self.total}" if self.total else str(self.completed)
        return f"{self.activity} {count}"


def report(activity: str, completed: int | None = None, total: int | None = None) -> None:
    """Appends one event to the watched run's progress file, if there is one.

    One ``write`` of one short line to a file opened for appending: lines from several
    processes of a task never interleave (POSIX appends of less than a page are atomic).
    """
    path = os.environ.get(PROGRESS_FILE_ENV)
    if not path:
        return
    line = json.dumps(dataclasses.asdict(ProgressEvent(activity, completed, total))) + "\n"
    try:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line)
    except OSError:
        pass  # the watcher went away or its disk is full: the step itself goes on


def read_events(path: str, offset: int) -> tuple[list[ProgressEvent], int]:
    """The events appended to ``path`` since byte ``offset``, and the offset to read on from.

    A line still being written (no newline yet) is left for the next read.
    """
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            chunk = f.read()
    except FileNotFoundError:
        return [], offset
    complete = chunk[: chunk.rfind(b"\n") + 1]
    events = []
    for line in complete.splitlines():
        try:
            events.append(ProgressEvent(**json.loads(line)))
        except (ValueError, TypeError):
            continue  # not ours: progress is best effort
    return events, offset + len(complete)
