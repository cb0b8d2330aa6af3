"""What an embedded run tracks, playing the part KFP's MLflow plugin plays on a cluster: the
pipeline run's parent run when the run starts, a nested run per task when it starts (its
``MLFLOW_RUN_ID`` set in the task's processes), the task's outputs and outcome when it ends, and
for a step the cache answered, what it reused and from which run.

Where: a tracking URI given (``--tracking-uri``, else ``MLFLOW_TRACKING_URI``) wins; otherwise
the store under the pipeline root (:mod:`kfstack.tracking.store`): through ``kfstack ui``'s
server where one serves it now, else a server started with the run and stopped when it ends.
Without MLflow (or, for the store, without the full MLflow) the run is not tracked and says so
in one line with what to install.

The server starts, and the parent run is made, on a thread of its own while the run goes on (the
server takes seconds to answer: 7 to 9 on two cores). A task of kfstack's own components that
starts before then does not wait: its run is made (and, when it ends, its outputs logged) on a
thread of its own once the server answers, and its processes are given a run file
(:data:`kfstack.tracking.client.RUN_FILE_ENV`) in place of ``MLFLOW_RUN_ID``, which kfstack's
wrappers of the team's code (the training entrypoint, the Spark driver) read before the code starts
(:func:`kfstack.tracking.client.join_run`). Any other task (a team's own component, whose MLflow
calls read ``MLFLOW_RUN_ID`` alone) starts once its run is made, as KFP's plugin makes it.
"""

from __future__ import annotations

import dataclasses
import getpass
import itertools
import os
import threading
from collections.abc import Callable, Mapping
from typing import Any

from kfstack.tracking import runs
from kfstack.tracking.client import (
    INSTALL_HINT,
    RUN_FILE_ENV,
    RUN_ID_ENV,
    SWITCH_ENV,
    TRACKING_URI_ENV,
    Tracker,
    process_environment,
    reachable,
    read_notices,
    switched_off,
    write_run_file,
)
from kfstack.tracking.store import (
    SERVER_INSTALL_HINT,
    LocalServer,
    ServerNotReady,
    open_ui,
    server_installed,
)

NOTICE_FILE = "tracking-notices.jsonl"
"""In the run directory: what the run's processes could not track (:mod:`kfstack.tracking.client`)."""
RUN_FILES = "tracking-runs"
"""In the run directory: the run files of tasks that started before their runs were made."""

FINISHED, FAILED, KILLED = "FINISHED", "FAILED", "KILLED"


@dataclasses.dataclass(frozen=True)
class Destination:
    """Where a run tracks: ``uri`` (and the store's ``server`` to start), or ``off`` saying why;
    ``chosen``: off because the person asked (nothing to say while the run starts)."""

    uri: str = ""
    server: LocalServer | None = None
    off: str = ""
    chosen: bool = False


def destination(
    pipeline_root: str, tracking_uri: str | None, enabled: bool, environ: Mapping[str, str] | None = None
) -> Destination:
    """Where a run under ``pipeline_root`` tracks (module docstring)."""
    environ = os.environ if environ is None else environ
    if not enabled:
        return Destination(off="turned off (--no-tracking)", chosen=True)
    if switched_off(environ):
        return Destination(off=f"turned off ({SWITCH_ENV}=off)", chosen=True)
    uri = tracking_uri or environ.get(TRACKING_URI_ENV, "")
    if uri:
        if not reachable(uri):
            return Destination(
                off=f"{TRACKING_URI_ENV} is {uri}, and no MLflow client is installed: {INSTALL_HINT}"
            )
        return Destination(uri=uri)
    ui = open_ui(pipeline_root)
    if ui:  # `kfstack ui` serves the store now: no server of the run's own to start
        return Destination(uri=ui)
    if not server_installed():
        return Destination(
            off="the embedded store needs the full MLflow (its server): "
            f"{SERVER_INSTALL_HINT}; or set {TRACKING_URI_ENV} to a tracking server; --no-tracking "
            "turns tracking off without this line"
        )
    server = LocalServer(pipeline_root)
    return Destination(uri=server.uri, server=server)


def started_by(arguments: Mapping[str, Any]) -> str:
    """What started an embedded run (:func:`kfstack.tracking.runs.started_by`): a drift alert,
    else the person running it (an embedded run has no schedule)."""
    try:
        person = getpass.getuser()
    except (KeyError, OSError):
        person = ""
    return runs.started_by(trigger=str(arguments.get(runs.TRIGGER_PARAMETER) or ""), person=person)


class TaskRun:
    """A task's MLflow run: made at once where the parent run is, else on a thread of its own
    once the parent is made, its id then written to :attr:`file` for the task's processes."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.id: str | None = None
        self._made = threading.Event()

    @property
    def known(self) -> bool:
        return self._made.is_set()

    def made(self, run_id: str | None, tell_processes: bool) -> None:
        self.id = run_id
        if tell_processes:
            write_run_file(self.file, run_id)
        self._made.set()

    def wait(self) -> str | None:
        """The run's id once it is made (the wait is bounded by the parent's, and one request)."""
        self._made.wait()
        return self.id


class RunTracking:
    """The MLflow runs of one embedded pipeline run.

    Args:
        where: From :func:`destination` (not off).
        run_dir: The run's directory (tagged on every run, so ``kfstack clean`` finds them).
        pipeline: The pipeline's name: the experiment's and the parent run's.
        version: The pipeline version the run runs.
        code_version: kfstack's version.
        parameters: The run's effective per-run values and settings.
    """

    def __init__(
        self,
        where: Destination,
        run_dir: str,
        pipeline: str,
        version: str,
        code_version: str,
        parameters: Mapping[str, Any],
    ) -> None:
        self.uri, self.server = where.uri, where.server
        self.notices = os.path.join(run_dir, NOTICE_FILE)
        self.tracker = Tracker(self.uri, self.notices, origin="run")
        self.experiment = pipeline
        self.parent: str | None = None
        self._common = {runs.RUN_DIR_TAG: run_dir, runs.PIPELINE_TAG: pipeline}
        self._parent_tags = {
            **self._common,
            runs.PIPELINE_VERSION_TAG: version,
            runs.KFSTACK_VERSION_TAG: code_version,
            runs.STARTED_BY_TAG: started_by(parameters),
        }
        self._parameters = dict(parameters)
        self._run_name = os.path.basename(run_dir)
        self._run_files = os.path.join(run_dir, RUN_FILES)
        self._starting = threading.Thread(target=self._start, name="tracking", daemon=True)
        self._pending: list[threading.Thread] = []  # tasks' runs waiting for the parent
        self._count = itertools.count()
        self._lock = threading.Lock()

    def start(self) -> None:
        """Starts the store's server (if any) and makes the parent run, on a thread of its own."""
        if self.server is not None:
            self.server.start()
        self._starting.start()

    def _start(self) -> None:
        if self.server is not None:
            try:
                self.server.wait_ready()
            except ServerNotReady as err:
                self.tracker.give_up("the whole run", err)
                return
        self.parent = runs.start_pipeline_run(
            self.tracker, self.experiment, self._run_name, self._parent_tags, self._parameters
        )

    def _parent(self) -> str | None:
        self._starting.join()
        return self.parent

    def _later(self, work: Callable[[], None], name: str) -> None:
        """``work()`` on a thread of its own, which :meth:`finish` waits for."""
        thread = threading.Thread(target=work, name=name, daemon=True)
        with self._lock:
            self._pending.append(thread)
        thread.start()

    def task_environment(self, task_run: TaskRun | None) -> dict[str, str]:
        """What a task's processes are told so that their MLflow calls land in its run: its id,
        or where it is not made yet, the file that will hold it."""
        if task_run is None:
            return process_environment(self.uri, None, self.notices)
        if task_run.known:
            return process_environment(self.uri, task_run.id, self.notices)
        # MLFLOW_RUN_ID empty: one this process inherited (a person's shell) is not the task's.
        pending = {RUN_FILE_ENV: task_run.file, RUN_ID_ENV: ""}
        return {**process_environment(self.uri, None, self.notices), **pending}

    def task_started(self, task: str, tags: Mapping[str, str] | None = None, wait: bool = False) -> TaskRun:
        """A nested run for a task that runs now (with ``tags`` besides the run's own): made now
        where the parent run is, else once it is (module docstring). ``wait``: made now in any
        case, after the parent (the task's processes would not read a run file)."""
        os.makedirs(self._run_files, exist_ok=True)
        task_run = TaskRun(os.path.join(self._run_files, f"{next(self._count)}-{task}"))
        later = self._starting.is_alive() and not wait

        def make() -> None:
            run_id = None
            try:
                parent = self._parent()
                if parent is not None:
                    run_id = runs.start_task_run(
                        self.tracker, self.experiment, parent, task, {**self._common, **(tags or {})}
                    )
            finally:  # the task's processes stop waiting, whatever happened
                task_run.made(run_id, tell_processes=later)

        if later:
            self._later(make, f"tracking {task}")
        else:
            make()
        return task_run

    def task_finished(
        self, task_run: TaskRun | None, succeeded: bool | None, outputs: Mapping[str, Any]
    ) -> None:
        """The task's outputs and outcome into its run (once it is made: the run does not wait
        for it). ``succeeded`` None: the task was stopped (Ctrl-C)."""
        if task_run is None:
            return

        def end() -> None:
            run_id = task_run.wait()
            if run_id is None:
                return
            if outputs:
                runs.log_outputs(self.tracker, run_id, outputs)
            self.tracker.end_run(run_id, FINISHED if succeeded else KILLED if succeeded is None else FAILED)

        if task_run.known:
            end()
        else:
            self._later(end, "tracking a task's end")

    def task_cached(self, task: str, outputs: Mapping[str, Any], cached_from: str) -> None:
        """A step the cache answered: its run holds what it reused, tagged with where from."""
        task_run = self.task_started(task, {runs.CACHED_FROM_TAG: cached_from})
        self.task_finished(task_run, True, outputs)

    def finish(self, status: str, metrics: Mapping[str, Any]) -> dict[str, Any]:
        """Ends the parent run (``status``: the summary's SUCCEEDED, FAILED or CANCELLED) with
        the run's figures (the summary's ``metrics``: each task's, as ``<output>.<name>``, so that
        the runs of a pipeline compare side by side) and stops the store's server; returns the
        summary's ``tracking`` entry."""
        try:
            parent = self._parent()
            while True:  # each bounded: the parent's wait, then requests that time out
                with self._lock:
                    if not self._pending:
                        break
                    thread = self._pending.pop(0)
                thread.join()
            if parent is not None:
                self.tracker.log_metrics(parent, metrics, what="the run's figures")
                mlflow_status = {"SUCCEEDED": FINISHED, "CANCELLED": KILLED}.get(status, FAILED)
                self.tracker.end_run(parent, mlflow_status)
        finally:
            if self.server is not None:
                self.server.stop()
        return self.summary_entry()

    def summary_entry(self) -> dict[str, Any]:
        """Where the run was tracked, and what was not (said once, with why)."""
        entry: dict[str, Any] = {"uri": self.uri, "experiment": self.experiment, "run_id": self.parent}
        notices = read_notices(self.notices)
        failures = [n for n in notices if n.get("error")]
        if failures:
            first = failures[0]
            entry["error"] = f"{first.get('origin') or 'a process'}: {first['error']}"
            entry["not_tracked"] = (
                # Without the parent run nothing of the run was tracked, whatever failed first.
                ["the whole run"]
                if self.parent is None
                else sorted({n["not_tracked"] for n in notices if n.get("not_tracked")})
            )
        return entry


def off_entry(reason: str) -> dict[str, Any]:
    """The summary's ``tracking`` entry of a run that was not tracked."""
    return {"off": reason}
