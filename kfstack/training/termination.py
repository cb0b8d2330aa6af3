"""A trainer's failure, written where Kubernetes keeps it after the container ends.

Under Katib's StdOut metrics collector a trial's output goes to Katib's metrics file, not to the
container log, so a failed trial's log tail cannot be read from the pod. Kubernetes keeps what a
container writes to its termination message file (``terminationMessagePath``, by default
``/dev/termination-log``, at most 4096 bytes) in the pod's status; the launcher reads it back
(``kfstack.kubernetes.launcher``). Outside a container the file does not exist and nothing is
written.
"""

from __future__ import annotations

import contextlib
import os
import traceback
from collections.abc import Iterator

TERMINATION_LOG = "/dev/termination-log"
# Kubernetes truncates a termination message to 4096 bytes: keep the end, where the error is.
MAX_BYTES = 4096


# The error line's share of the message; the rest is the end of the traceback (where it failed).
HEADLINE_BYTES = 1024


def failure_message(error: BaseException, limit: int = MAX_BYTES) -> str:
    """The error line first (cut to :data:`HEADLINE_BYTES`), then as much of the end of the
    traceback's frames as fits in ``limit`` bytes."""
    headline = f"{type(error).__name__}: {error}".encode()[:HEADLINE_BYTES].decode(errors="ignore")
    frames = "Traceback (most recent call last):\n" + "".join(traceback.format_tb(error.__traceback__))
    room = limit - len(headline.encode()) - 1
    tail = frames.encode()[-room:].decode(errors="ignore")
    return f"{headline}\n{tail}"


@contextlib.contextmanager
def termination_message_on_failure(path: str = TERMINATION_LOG) -> Iterator[None]:
    """Within the block an exception is also written to ``path`` (when it exists), then raised."""
    try:
        yield
    except Exception as error:
        if os.path.exists(path):
            with contextlib.suppress(OSError), open(path, "w", encoding="utf-8") as f:
                f.write(failure_message(error))
        raise
