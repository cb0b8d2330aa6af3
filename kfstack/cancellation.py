"""SIGTERM as an exception, so a cancelled step stops what it started before it exits.

A cancelled KFP task (or a deleted pod) gets SIGTERM and, after the grace period, SIGKILL.
Python's default would end the process at once and orphan the trainer processes or the cluster
job the step launched; inside :func:`sigterm_raises` SIGTERM raises :class:`CancelledError`
instead, so ``finally``/``except`` blocks run their cleanup.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

from kfstack.errors import CancelledError


def _raise(signum, frame) -> None:
    raise CancelledError("received SIGTERM (the step was cancelled)")


@contextlib.contextmanager
def sigterm_raises() -> Iterator[None]:
    """Within the block SIGTERM raises :class:`CancelledError` (main thread only).

    Signal handlers can only be installed from the main thread; elsewhere (e.g. a test runner's
    worker thread) the block runs with the handler the process already has.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
