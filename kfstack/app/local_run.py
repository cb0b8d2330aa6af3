"""Runs a pipeline on the embedded platform, shows it live, and summarises it.

``kfp.local``'s ``SubprocessRunner(use_venv=False)`` executes every task of the pipeline spec as
a subprocess of this process, with this interpreter -- the same spec a KFP backend would run.
This module adds what a person watching a run needs and kfp.local does not give:

- one live console line per task (:mod:`kfstack.app.console`) with the progress the task
  reports (:mod:`kfstack.progress`), while kfp.local's own output and each task's output go to
  log files in the run's directory (:mod:`kfstack.app.run_directory`); ``verbose`` also
  echoes everything;
- the failing task's own error and the tail of its own log;
- Ctrl-C that stops every process the run started and still writes the summary (``CANCELLED``);
- services a task starts for later tasks (model servers, :mod:`kfstack.serving.local_services`)
  stopped when the run ends, however it ends;
- nothing left in the system's temp folder: every task process gets the run's ``tmp/`` as
  ``$TMPDIR``, removed when the run ends, whatever the outcome;
- the peak memory of the whole process tree (Spark's JVM and the trainer ranks included).

It also answers a step from an earlier run that ran it with the same inputs and code, as KFP's
cache does on a cluster (:mod:`kfstack.app.step_cache`), and says so in the console and summary.

kfp.local offers no hook for any of this: the hooks around its tasks are put in place through
:mod:`kfstack.kfp_adapter`, the one module that touches kfp's internals, for the kfp releases it
knows. On another release (or where what it relies on has changed) the adapter logs one line and
the run proceeds as kfp.local runs it alone: every task's output in kfp's log, the environment
the tasks need set for the whole run, the summary with the run's outcome and no stages; and the
step cache stays off when it cannot be handed to kfp.local.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import io
import os
import re
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from typing import Any, TextIO

import psutil

from kfstack import kfp_adapter, progress
from kfstack.app import step_cache
from kfstack.app.console import CANCELLED as SHOWN_CANCELLED
from kfstack.app.console import DONE as SHOWN_DONE
from kfstack.app.console import FAILED as SHOWN_FAILED
from kfstack.app.console import RunConsole
from kfstack.app.run_directory import KFP_LOG, RunDirectory
from kfstack.app.summary import (
    CACHED,
    CANCELLED,
    DRIFT_REPORT,
    FAILED,
    GATE_REPORT,
    SUCCEEDED,
    RunSummary,
    StageRecord,
    collect_outputs,
    data_counts,
    report_entry,
    serving_summary,
    tuning_summary,
    unreported_data,
)
from kfstack.images import COMPONENT_IMAGE
from kfstack.platforms import RUN_DIR_ENV
from kfstack.serving import local_services, registry
from kfstack.tracking import embedded as tracking
from kfstack.version import VERSION_ENV, __version__, pipeline_version

LOG_TAIL_LINES = 40
PROGRESS_POLL_SECONDS = 0.3
# Seconds a task's processes get to exit after SIGTERM (the JVM removes its scratch, trainer
# ranks stop their process group) before SIGKILL.
STOP_GRACE_SECONDS = 10.0
# The last line of a Python traceback: "pkg.module.SomeError: message".
_EXCEPTION_LINE = re.compile(r"^\s*([A-Za-z_][\w.]*(?:Error|Exception|Exit)):\s?(.*)$")


@dataclasses.dataclass
class _TaskAttempt:
    name: str
    status: str
    seconds: float
    outputs: dict[str, Any]
    cached_from: str = ""


class _OutputRouter:
    """Splits a task process's output: kfp executor lines to kfp's log, the rest to the task's."""

    def __init__(self, own: TextIO, kfp: TextIO, echo: RunConsole | None) -> None:
        self._own, self._kfp, self._echo = own, kfp, echo
        self._in_executor_input = False

    def line(self, line: str) -> None:
        if self._in_executor_input:
            self._kfp.write(line)
            self._in_executor_input = line.rstrip("\n") != "}"
        elif line.startswith(kfp_adapter.EXECUTOR_LOG_PREFIX):
            self._kfp.write(line)
            self._in_executor_input = line.rstrip().endswith(kfp_adapter.EXECUTOR_INPUT_HEADER)
        else:
            self._own.write(line)
            if self._echo is not None:  # kfp's lines reach the console through its own stream
                self._echo.print(line.rstrip("\n"))


def _stop_process_group(process: subprocess.Popen, grace_seconds: float = STOP_GRACE_SECONDS) -> None:
    """SIGTERM to the task's process group (it is the group's leader), SIGKILL after the grace."""
    group = process.pid
    for sig, wait in ((signal.SIGTERM, grace_seconds), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(group, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=0.1)
            try:
                os.killpg(group, 0)
            except ProcessLookupError:
                return  # every process of the group is gone
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=1.0)


class _TaskRunner:
    """Starts, routes, watches and, on Ctrl-C, stops the processes of a run's tasks."""

    def __init__(
        self,
        run: RunDirectory,
        console: RunConsole,
        verbose: bool,
        cache: step_cache.StepCache | None,
        tracked: tracking.RunTracking | None,
        version_name: str,
    ) -> None:
        self.run, self.console, self.verbose, self.cache, self.tracked = run, console, verbose, cache, tracked
        self.pipeline_version = version_name
        # The run's creation time, as KFP writes it (RFC 3339, UTC).
        self.created = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.attempts: list[_TaskAttempt] = []
        self._task = threading.local()  # the task a thread is running (ParallelFor runs several)
        self._progress_offsets: dict[str, int] = {}
        self._lock = threading.Lock()
        self._stop_polling = threading.Event()

    @contextlib.contextmanager
    def installed(self) -> Iterator[bool]:
        """kfstack's hooks around kfp.local's tasks while the block lasts; yields whether they are
        in place. Without them, the tasks get the run's environment from this process's."""
        with kfp_adapter.task_hooks(self) as hooked:
            if not hooked:
                with _environment(self.run_environment()):
                    yield False
                return
            poller = threading.Thread(target=self._poll_progress, name="progress", daemon=True)
            poller.start()
            try:
                yield True
            finally:
                self._stop_polling.set()
                poller.join()

    def execute_task(self, component: str, execute: Callable[[], kfp_adapter.TaskResult]) -> None:
        """One task, run or answered from the step cache (then recorded here: kfp.local runs
        nothing, so :meth:`run_task` is not called)."""
        if self.cache is None:
            execute()
            return
        self.cache.take_hit()  # nothing left from this thread's earlier task
        result = execute()
        origin = self.cache.take_hit()
        if origin is not None:
            name = _stage_name(component)
            self.attempts.append(_TaskAttempt(name, CACHED, 0.0, result.outputs, cached_from=origin))
            self.console.task_cached(name, os.path.basename(origin))
            if self.tracked is not None:
                self.tracked.task_cached(name, result.outputs, origin)

    def run_task(
        self,
        component: str,
        arguments: dict[str, Any],
        run: Callable[[dict[str, Any]], kfp_adapter.TaskResult],
        image: str = "",
    ) -> None:
        """A task that runs: its console line and progress, its time and outcome, with the
        run-time placeholders filled in its arguments."""
        name = _stage_name(component)
        self._task.name = name
        self.console.task_started(name)
        with self._lock:
            self._progress_offsets[name] = 0
        start = time.perf_counter()
        # The task's MLflow run, which its processes log into: made before they start, or, for
        # kfstack's own components while the store's server starts, as soon as it answers (their
        # wrappers of the team's code wait for it; a team's own component is not wrapped).
        tracked_run = (
            self.tracked.task_started(name, wait=image != COMPONENT_IMAGE)
            if self.tracked is not None
            else None
        )
        self._task.tracking_env = (
            self.tracked.task_environment(tracked_run) if self.tracked is not None else {}
        )
        try:
            result = run(self._with_run_times(arguments))
        except KeyboardInterrupt:
            self._finish(name, CANCELLED, time.perf_counter() - start, {})
            if self.tracked is not None:
                with _sigint_ignored():
                    self.tracked.task_finished(tracked_run, None, {})
            raise
        self._finish(
            name, SUCCEEDED if result.succeeded else FAILED, time.perf_counter() - start, result.outputs
        )
        if self.tracked is not None:
            self.tracked.task_finished(tracked_run, result.succeeded, result.outputs)

    def _with_run_times(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The task's arguments with the run-time placeholders a KFP backend fills in and
        kfp.local 2.17 does not (it fails resolving them): the creation time is the run's start;
        a run started here is not scheduled, so its schedule time is empty."""
        from kfp import dsl

        filled = {
            dsl.PIPELINE_JOB_CREATE_TIME_UTC_PLACEHOLDER: self.created,
            dsl.PIPELINE_JOB_SCHEDULE_TIME_UTC_PLACEHOLDER: "",
        }
        return {k: filled.get(v, v) if isinstance(v, str) else v for k, v in arguments.items()}

    def _finish(self, name: str, status: str, seconds: float, outputs: dict[str, Any] | None) -> None:
        self._show_progress(name)  # what the task reported since the last poll
        with self._lock:
            self._progress_offsets.pop(name, None)
        self.attempts.append(_TaskAttempt(name, status, seconds, dict(outputs or {})))
        shown = {SUCCEEDED: SHOWN_DONE, FAILED: SHOWN_FAILED, CANCELLED: SHOWN_CANCELLED}[status]
        self.console.task_finished(name, shown, seconds)

    def run_environment(self) -> dict[str, str]:
        """What every task process of the run is told, besides its own progress file."""
        return {
            "TMPDIR": self.run.tmp,
            RUN_DIR_ENV: self.run.path,
            registry.REGISTRY_DIR_ENV: self.run.registry,
            # What a compiled pipeline stamps into its tasks on a cluster (kfstack compile).
            VERSION_ENV: self.pipeline_version,
            # Services a task starts (model servers) belong to this process: they stop with it.
            local_services.OWNER_PID_ENV: str(os.getpid()),
        }

    def run_process(self, full_command: list[str], env_vars: dict[str, str] | None = None) -> int:
        """In place of kfp's: same command and return code; the process leads its own group
        (stoppable as a whole), writes its temp files under the run, and its output goes to the
        log files."""
        name = self._task.name
        env = {
            **os.environ,
            **(env_vars or {}),
            **self.run_environment(),
            **getattr(self._task, "tracking_env", {}),
            progress.PROGRESS_FILE_ENV: self.run.progress_file(name),
        }
        with open(self.run.log(name), "a", encoding="utf-8", buffering=1) as own:
            router = _OutputRouter(own, sys.stdout, self.console if self.verbose else None)
            process = subprocess.Popen(
                full_command,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                errors="replace",
                bufsize=1,
                env=env,
                start_new_session=True,
            )
            try:
                assert process.stdout is not None
                for line in process.stdout:
                    router.line(line)
                return process.wait()
            except BaseException:
                _stop_process_group(process)
                raise

    def _poll_progress(self) -> None:
        while not self._stop_polling.wait(PROGRESS_POLL_SECONDS):
            with self._lock:
                running = list(self._progress_offsets)
            for name in running:
                self._show_progress(name)

    def _show_progress(self, name: str) -> None:
        with self._lock:
            if name not in self._progress_offsets:
                return
            events, self._progress_offsets[name] = progress.read_events(
                self.run.progress_file(name), self._progress_offsets[name]
            )
        for event in events:
            self.console.task_progress(name, event)


def _stage_name(component_name: str) -> str:
    # A component's name in the spec is "comp-<component>"; the prefix stripped, a readable name.
    return component_name.removeprefix("comp-")


def tree_rss(processes: list[tuple[int, int, int, int]]) -> int:
    """The summed resident memory of ``(pid, parent pid, rss, vms)`` processes, a process that
    shares its parent's address space counted once.

    Such a child is one spawned with ``vfork``/``CLONE_VM`` that has not exec'd yet (the JVM
    starts ``chmod`` and ``rm`` so, through ``jspawnhelper``): for that instant its RSS and size
    are its parent's to the byte, and counting both doubled a Spark job's peak in some samples
    (x10: 3.8 GiB against 2.0)."""
    memory = {pid: (rss, vms) for pid, _, rss, vms in processes}
    return sum(rss for pid, ppid, rss, vms in processes if memory.get(ppid) != (rss, vms))


class PeakMemorySampler:
    """Samples the summed RSS of a process (by default this one) and all its descendants in a
    thread (:func:`tree_rss`)."""

    def __init__(self, interval_seconds: float = 0.25, root_pid: int | None = None) -> None:
        self._interval = interval_seconds
        self._root_pid = root_pid or os.getpid()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)
        self.peak_bytes = 0

    def _sample(self) -> int:
        try:
            root = psutil.Process(self._root_pid)
            tree = [root, *root.children(recursive=True)]
        except psutil.Error:
            return 0  # gone already
        processes = []
        for proc in tree:
            with contextlib.suppress(psutil.Error):
                memory = proc.memory_info()
                processes.append((proc.pid, proc.ppid(), memory.rss, memory.vms))
        return tree_rss(processes)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak_bytes = max(self.peak_bytes, self._sample())
            self._stop.wait(self._interval)

    def __enter__(self) -> PeakMemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


class _Tee(io.TextIOBase):
    """Writes to a log file and, with ``--verbose``, to the console stream as well."""

    def __init__(self, log: TextIO, echo: TextIO | None) -> None:
        self._streams = [log] if echo is None else [log, echo]

    def write(self, text: str) -> int:
        for stream in self._streams:
            stream.write(text)
        return len(text)

    def flush(self) -> None:
        for stream in self._streams:
            stream.flush()


@contextlib.contextmanager
def _output_to(path: str, echo: TextIO | None) -> Iterator[None]:
    """kfp.local's own output (its logging, warnings, the processes' executor lines) to ``path``,
    and to ``echo`` too when given."""
    with open(path, "a", encoding="utf-8", buffering=1) as log:
        tee = _Tee(log, echo)
        with contextlib.redirect_stdout(tee), contextlib.redirect_stderr(tee):
            yield


@contextlib.contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    """``values`` in this process's environment while the block lasts, which kfp.local's own
    task processes inherit (the run's settings when kfstack does not start them itself)."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def _sigint_ignored() -> Iterator[None]:
    """A second Ctrl-C must not cut short the stopping and the summary of a cancelled run."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def own_log_tail(path: str, lines: int = LOG_TAIL_LINES) -> list[str]:
    """The last non-blank lines of a task's own log."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            content = [line.rstrip() for line in f if line.strip()]
    except FileNotFoundError:
        return []
    return content[-lines:]


def _exception_line(log_tail: list[str]) -> str | None:
    for line in reversed(log_tail):
        match = _EXCEPTION_LINE.match(line)
        if match:
            return f"{match.group(1)}: {match.group(2)}"
    return None


def run_pipeline_locally(
    pipeline_name: str,
    arguments: dict[str, Any],
    pipeline_root: str,
    verbose: bool = False,
    console_stream: TextIO | None = None,
    resume: RunDirectory | None = None,
    cache: bool = True,
    track: bool = True,
    tracking_uri: str | None = None,
) -> RunSummary:
    """Runs a registered pipeline with kfp.local on this machine, in a new run directory.

    Args:
        pipeline_name: A registered pipeline's name (:func:`kfstack.pipelines.pipeline_names`).
        arguments: Pipeline parameters; the rest take their defaults (all are recorded).
        pipeline_root: Where the run directory is created (see :mod:`run_directory`).
        verbose: Also echo every line of every task and of kfp.local to the console.
        console_stream: Where the live task lines go (default: this process's stderr).
        resume: An interrupted run's directory to run again in: steps that keep state there
            (the tuner's finished trials) pick up where it stopped.
        cache: Answer a step from an earlier run under the same root that ran it with the same
            inputs and code (:mod:`kfstack.app.step_cache`); False runs every step.
        track: Track the run in MLflow (:mod:`kfstack.tracking.embedded`): at ``tracking_uri``,
            else ``$MLFLOW_TRACKING_URI``, else the store under ``pipeline_root``.
        tracking_uri: A tracking server of the team's.

    Returns:
        The run's summary, also written to ``<run_dir>/summary.json``. A failed task or a
        Ctrl-C does not raise: ``status`` says ``FAILED`` or ``CANCELLED``.

    Raises:
        UsageError: An unknown parameter or a mistyped value, or an unwritable pipeline root
            (nothing started, no run directory).
    """
    from kfp import local

    from kfstack.pipelines import entry, load_pipeline, rendering, run_form

    pipeline_func = load_pipeline(pipeline_name)
    arguments = run_form.current_names(pipeline_func, arguments)
    effective = rendering.run_parameters(pipeline_name, arguments)
    # As on a cluster: a version with the run's frame compiled in, the settings given overriding
    # what it compiles in through the run form's settings_overrides.
    frame = {name: effective[name] for name in run_form.fixed_settings(pipeline_func) if name in effective}
    version = run_form.version_function(pipeline_func, frame)
    run_arguments = run_form.run_arguments(pipeline_func, arguments, frame)
    run = resume or RunDirectory.create(pipeline_root, pipeline_name, arguments=dict(arguments))
    # Either is False (and says what the run lacks) on a kfp release kfstack does not know.
    hooked = kfp_adapter.task_hooks_usable()
    cached = None
    if cache and kfp_adapter.step_cache_usable():
        cached = step_cache.StepCache(run, step_cache.StepCode(entry(pipeline_name).function))

    def init(caching: bool) -> None:
        local.init(
            runner=local.SubprocessRunner(use_venv=False),
            pipeline_root=run.artifacts,
            # Without the hooks, kfp.local raising at the end is what tells a failed run.
            raise_on_error=not hooked,
            enable_caching=caching,
            cache_root=cached.cache_root if caching and cached else None,
        )

    init(caching=cached is not None)
    if cached is not None and not step_cache.install(cached):
        cached = None
        init(caching=False)  # kfp's own cache keys no code: off rather than stale
    stream = console_stream or sys.stderr
    # The experiment is the pipeline's own name (a `module:function` pipeline's too).
    experiment = getattr(pipeline_func, "name", None) or pipeline_name
    version_name = pipeline_version()  # what the tasks are told and the run is tagged with
    tracked, off_reason, said = _tracking(
        pipeline_root, tracking_uri, track, hooked, run, experiment, version_name, effective
    )
    if said:  # once, where the person did not ask for it
        print(f"kfstack: tracking off: {off_reason}", file=stream, flush=True)
    console = RunConsole(stream, live=False if verbose else None)
    runner = _TaskRunner(run, console, verbose, cached, tracked, version_name)
    status, crash = SUCCEEDED, ""
    start = time.perf_counter()
    memory = PeakMemorySampler()
    try:
        echo = stream if verbose else None
        with console, memory, runner.installed(), _output_to(run.log(KFP_LOG), echo):
            version(**run_arguments)
    except KeyboardInterrupt:
        status = CANCELLED
    except Exception as err:  # kfp.local itself broke, not a task: still a summary, trace in kfp.log
        status, crash = FAILED, f"the embedded runner raised {type(err).__name__}: {err}"
        if not hooked:  # kfp.local's own way of failing a run: its message names the task
            crash = str(err)
        with open(run.log(KFP_LOG), "a", encoding="utf-8") as log:
            traceback.print_exc(file=log)
    finally:
        # Each task's processes were stopped with their group as its call unwound; the services
        # tasks started (model servers) outlive their tasks and stop here, with the run.
        with _sigint_ignored():
            try:
                local_services.stop_services(run.path)
            finally:
                run.remove_tmp()
    wall = time.perf_counter() - start

    summary: RunSummary | None = None
    try:
        summary = _summarise(
            pipeline_name, status, runner.attempts, run, effective, wall, memory.peak_bytes, hooked=hooked
        )
    finally:
        with _sigint_ignored():  # the parent run's end and the server's stop, whatever happened
            if tracked is not None:  # without a summary (a bug), the run is tracked as failed
                figures = summary.metrics if summary else {}
                tracking_entry = tracked.finish(summary.status if summary else FAILED, figures)
            else:
                tracking_entry = tracking.off_entry(off_reason)
    summary.tracking = tracking_entry
    if crash:
        summary.error = f"{crash} (see {run.log(KFP_LOG)})"
    with _sigint_ignored():
        summary.write_json(run.summary)
    run.release()  # the run has ended: `kfstack clean` may remove it
    if cached is not None:
        cached.release()  # and the runs whose outputs it reused
    return summary


def _tracking(
    pipeline_root: str,
    tracking_uri: str | None,
    track: bool,
    hooked: bool,
    run: RunDirectory,
    pipeline: str,
    version_name: str,
    parameters: dict[str, Any],
) -> tuple[tracking.RunTracking | None, str, bool]:
    """The run's tracking, started (its server and parent run on a thread of their own); or
    None, why not, and whether to say so (not where the person turned it off)."""
    where = tracking.destination(pipeline_root, tracking_uri, track)
    if where.off:
        return None, where.off, not where.chosen
    if not hooked:  # no task hooks: no task's run to make, nor its processes' environment to set
        return None, "this kfp release's tasks cannot be hooked, so none of them would be tracked", True
    tracked = tracking.RunTracking(where, run.path, pipeline, version_name, __version__, parameters)
    tracked.start()
    return tracked, "", False


def _summarise(
    pipeline: str,
    status: str,
    attempts: list[_TaskAttempt],
    run: RunDirectory,
    arguments: dict[str, Any],
    wall_seconds: float,
    peak_rss_bytes: int,
    hooked: bool = True,
) -> RunSummary:
    """The run's summary from its task attempts; ``hooked`` False: there are none to read (no
    task hooks on this kfp), and ``status`` is the run's outcome as kfp.local gave it."""
    stages: dict[str, StageRecord] = {}
    for attempt in attempts:  # a task retried by kfp.local appears once per attempt
        seconds = stages[attempt.name].seconds if attempt.name in stages else 0.0
        stages[attempt.name] = StageRecord(
            attempt.status,
            round(seconds + attempt.seconds, 2),
            # A cached step's log is the one of the run that computed its outputs.
            RunDirectory(attempt.cached_from or run.path).log(attempt.name),
            cached_from=attempt.cached_from,
        )
    # Every task's outputs, not only the pipeline's: outputs of tasks inside an ExitHandler
    # cannot be pipeline outputs (KFP compiler rule).
    outputs = {name: value for attempt in attempts for name, value in attempt.outputs.items()}
    metrics, artifacts = collect_outputs(outputs)
    summary = RunSummary(
        pipeline=pipeline,
        status=status,
        run_dir=run.path,
        wall_seconds=round(wall_seconds, 2),
        peak_rss_bytes=peak_rss_bytes,
        arguments=arguments,
        stages=stages,
        data=data_counts(metrics),
        data_unreported=unreported_data(outputs),
        metrics=metrics,
        artifacts=artifacts,
        kfp_log=run.log(KFP_LOG),
        tuning=tuning_summary(arguments, metrics, outputs),
        serving=serving_summary(outputs),
        drift=report_entry(outputs, DRIFT_REPORT),
        gate=report_entry(outputs, GATE_REPORT),
    )
    unfinished = [a for a in attempts if a.status not in (SUCCEEDED, CACHED)]
    if status == CANCELLED:
        during = f" during task {unfinished[-1].name}" if unfinished else ""
        summary.error = f"cancelled (Ctrl-C){during}; every process of the run was stopped"
    elif unfinished:
        failed = unfinished[0]
        tail = own_log_tail(run.log(failed.name))
        summary.status = FAILED
        summary.error = f"task {failed.name} failed: " + (
            _exception_line(tail) or "no exception line in its log"
        )
        summary.failed_task_log_tail = tail
    elif not attempts and hooked:
        summary.status = FAILED
        summary.error = "the pipeline ran no tasks"
    return summary
