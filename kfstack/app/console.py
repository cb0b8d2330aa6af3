"""What a person watching an embedded run sees: one line per task, kept up to date.

On a terminal the lines are live (``rich``): a spinner while a task runs, its progress bar when
the task reports one (Spark phases, epochs), its state and seconds. Anywhere else (CI logs, a
pipe, ``--verbose``) each change is one plain line, so a log reads top to bottom. Task logs and
kfp.local's own output never come here; they go to files in the run directory.
"""

from __future__ import annotations

from typing import Any, TextIO

from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn

from kfstack.progress import ProgressEvent

RUNNING, DONE, FAILED, CANCELLED, CACHED = "running", "done", "failed", "cancelled", "cached"
_STYLE = {RUNNING: "cyan", DONE: "green", FAILED: "bold red", CANCELLED: "yellow", CACHED: "green"}


class RunConsole:
    """Task lines of one run; a context manager around the run.

    Args:
        stream: Where the lines go (the process's real stderr: the run redirects
            ``sys.stdout``/``sys.stderr`` into log files while it runs).
        live: Redraw lines in place. Default: when ``stream`` is a terminal.
    """

    def __init__(self, stream: TextIO, live: bool | None = None) -> None:
        self.console = Console(file=stream, highlight=False, soft_wrap=True)
        self.live = self.console.is_terminal if live is None else live
        self._tasks: dict[str, TaskID] = {}
        self._progress = Progress(
            SpinnerColumn(finished_text=" "),
            TextColumn("{task.description:<20}"),
            TextColumn("[{task.fields[style]}]{task.fields[state]:<9}"),
            BarColumn(bar_width=24),
            # Fixed widths: a line must not jump as its activity text changes.
            TextColumn("{task.fields[activity]:<32}"),
            TimeElapsedColumn(),
            console=self.console,
            # The run owns sys.stdout/sys.stderr (they go to log files); rich must not take them.
            redirect_stdout=False,
            redirect_stderr=False,
            transient=False,
        )

    def __enter__(self) -> RunConsole:
        if self.live:
            self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live:
            self._progress.stop()

    def print(self, text: str) -> None:
        """A line of its own (a message, or a task's output with ``--verbose``)."""
        if self.live:
            self._progress.console.print(text, markup=False)
        else:
            self.console.print(text, markup=False)

    def task_started(self, name: str) -> None:
        self._tasks[name] = self._progress.add_task(
            name, total=None, state=RUNNING, style=_STYLE[RUNNING], activity=""
        )
        self._plain(f"{name:<20} {RUNNING}")

    def task_progress(self, name: str, event: ProgressEvent) -> None:
        task = self._tasks.get(name)
        if task is None:
            return
        fields: dict[str, Any] = {"activity": event.describe()}
        if event.total:
            fields.update(total=event.total, completed=event.completed or 0)
        self._progress.update(task, **fields)
        self._plain(f"{name:<20} {RUNNING:<9} {event.describe()}")

    def task_finished(self, name: str, state: str, seconds: float) -> None:
        task = self._tasks.get(name)
        if task is not None:
            shown = next(t for t in self._progress.tasks if t.id == task)
            total = shown.total or 1
            # A finished task's bar is full; a failed or cancelled one stays where it stopped.
            completed = total if state == DONE else shown.completed
            self._progress.update(task, state=state, style=_STYLE[state], total=total, completed=completed)
            self._progress.stop_task(task)
        self._plain(f"{name:<20} {state:<9} {seconds:.1f} s")

    def task_cached(self, name: str, origin: str) -> None:
        """A task answered from the step cache: its outputs are those of the run ``origin``."""
        activity = f"outputs of {origin}"
        task = self._progress.add_task(
            name, total=1, completed=1, state=CACHED, style=_STYLE[CACHED], activity=activity
        )
        self._progress.stop_task(task)
        self._plain(f"{name:<20} {CACHED:<9} {activity}")

    def _plain(self, line: str) -> None:
        if not self.live:
            self.console.print(line, markup=False)
