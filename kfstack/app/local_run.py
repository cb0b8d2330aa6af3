"""Runs a compiled-equivalent pipeline on the embedded platform and summarises the run.

``kfp.local``'s ``SubprocessRunner(use_venv=False)`` executes every task of the pipeline spec as
a subprocess of this process, with this interpreter -- the same spec a KFP backend would run.
This module adds what a person watching a run wants and kfp.local does not give: per-task
seconds, the failing task's error, the peak memory of the whole process tree (Spark's JVM and
the trainer ranks included) and a summary (also as JSON) with the key metrics and where the
artifacts are.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import logging
import os
import re
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import psutil

logger = logging.getLogger(__name__)

LOG_TAIL_LINES = 40
# The last line of a Python traceback: "pkg.module.SomeError: message".
_EXCEPTION_LINE = re.compile(r"^\s*([A-Za-z_][\w.]*(?:Error|Exception|Exit)):\s?(.*)$")
# Where the feature job's counts show up in the pipeline's outputs (see report_metrics()).
DATA_COUNT_KEYS = ("rows_read", "rows_written", "rows_quarantined", "quarantined_fraction")


@dataclasses.dataclass
class TaskRecord:
    """One executed task: its kfp.local name, outcome, seconds and the tail of its log."""

    name: str
    status: str
    seconds: float
    log_tail: list[str]
    # Output name -> value or artifact, as kfp.local returned them (not part of the summary).
    outputs: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False)


@dataclasses.dataclass
class RunSummary:
    """What ``kfstack run --local`` prints and writes with ``--summary-json``.

    Attributes:
        pipeline: Pipeline name.
        status: ``SUCCEEDED`` or ``FAILED``.
        wall_seconds: Wall time of the whole run.
        stages: Seconds per executed task, in execution order.
        metrics: Scalar metrics of the tasks' Metrics outputs, ``<output>.<metric>``.
        artifacts: Output name -> local URI of every task's output artifact.
        data: Row counts of the feature job (read / written / quarantined, per reason).
        peak_rss_bytes: Peak resident memory summed over this process and all its children.
        pipeline_root: Directory under which kfp.local wrote the run's artifacts.
        error: The failing task and its exception line, when the run failed.
        failed_task_log_tail: Last lines of the failing task's log.
    """

    pipeline: str
    status: str
    wall_seconds: float
    stages: dict[str, float]
    metrics: dict[str, float]
    artifacts: dict[str, str]
    data: dict[str, float]
    peak_rss_bytes: int
    pipeline_root: str
    arguments: dict[str, Any]
    error: str | None = None
    failed_task_log_tail: list[str] = dataclasses.field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def write_json(self, path: str) -> None:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.to_dict(), f, indent=2, sort_keys=True)

    def render(self) -> str:
        """A human-readable summary for the terminal."""
        lines = [
            f"pipeline   {self.pipeline}",
            f"status     {self.status}",
            f"wall time  {self.wall_seconds:.1f} s",
            f"peak RSS   {self.peak_rss_bytes / 2**30:.2f} GiB (all processes)",
            "stages:",
            *(f"  {name:<28} {secs:8.1f} s" for name, secs in self.stages.items()),
        ]
        if self.data:
            lines.append("data:")
            lines += [f"  {k:<28} {_fmt(v)}" for k, v in self.data.items()]
        if self.metrics:
            lines.append("metrics:")
            lines += [f"  {k:<40} {_fmt(v)}" for k, v in sorted(self.metrics.items())]
        if self.artifacts:
            lines.append("artifacts:")
            lines += [f"  {k:<20} {v}" for k, v in self.artifacts.items()]
        if self.error:
            lines += ["error:", f"  {self.error}", "log tail of the failed task:"]
            lines += [f"  {line}" for line in self.failed_task_log_tail]
        return "\n".join(lines)


def _fmt(value: float) -> str:
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.4f}"
    return f"{int(value):,}"


class _PeakMemorySampler:
    """Samples the summed RSS of this process and all its descendants in a thread."""

    def __init__(self, interval_seconds: float = 0.25) -> None:
        self._interval = interval_seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)
        self.peak_bytes = 0

    def _sample(self) -> int:
        root = psutil.Process(os.getpid())
        total = 0
        for proc in [root, *root.children(recursive=True)]:
            with contextlib.suppress(psutil.Error):
                total += proc.memory_info().rss
        return total

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak_bytes = max(self.peak_bytes, self._sample())
            self._stop.wait(self._interval)

    def __enter__(self) -> _PeakMemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


class _Tee(io.TextIOBase):
    """Writes through to ``target`` and keeps everything written (one task's log)."""

    def __init__(self, target: Any) -> None:
        self._target = target
        self.buffer_text = io.StringIO()

    def write(self, s: str) -> int:
        self.buffer_text.write(s)
        return self._target.write(s)

    def flush(self) -> None:
        self._target.flush()

    def tail(self, n: int) -> list[str]:
        lines = [ln.rstrip() for ln in self.buffer_text.getvalue().splitlines()]
        return [ln for ln in lines if ln.strip()][-n:]


@contextlib.contextmanager
def _record_tasks(records: list[TaskRecord], on_task_done: Callable[[TaskRecord], None]) -> Iterator[None]:
    """Times every task kfp.local runs and keeps its log tail.

    kfp.local offers no task-event hook, so this wraps the one function its orchestrators call
    per task (``task_dispatcher.run_single_task_implementation``, kfp 2.17 -- pinned). The
    test suite runs a real pipeline through it, so a kfp upgrade that moves it fails loudly.
    """
    from kfp.local import task_dispatcher

    original = task_dispatcher.run_single_task_implementation

    def timed(*args: Any, **kwargs: Any) -> Any:
        name = _task_name(kwargs)
        tee = _Tee(sys.stdout)
        start = time.perf_counter()
        with contextlib.redirect_stdout(tee):
            outputs, status = original(*args, **kwargs)
        record = TaskRecord(
            name=name,
            status=status.name,
            seconds=time.perf_counter() - start,
            log_tail=tee.tail(LOG_TAIL_LINES),
            outputs=dict(outputs or {}),
        )
        records.append(record)
        on_task_done(record)
        return outputs, status

    task_dispatcher.run_single_task_implementation = timed
    try:
        yield
    finally:
        task_dispatcher.run_single_task_implementation = original


def _task_name(kwargs: dict[str, Any]) -> str:
    # component_name is "comp-<component>"; strip the prefix for a readable stage name.
    name = kwargs.get("component_name", "task")
    return name[len("comp-") :] if name.startswith("comp-") else name


def _stage_seconds(records: list[TaskRecord]) -> dict[str, float]:
    # A task retried by kfp.local appears once per attempt; its stage time is their sum.
    stages: dict[str, float] = {}
    for record in records:
        stages[record.name] = round(stages.get(record.name, 0.0) + record.seconds, 2)
    return stages


def _exception_line(log_tail: list[str]) -> str | None:
    for line in reversed(log_tail):
        match = _EXCEPTION_LINE.match(line)
        if match:
            return f"{match.group(1)}: {match.group(2)}"
    return None


def _print_progress(record: TaskRecord) -> None:
    mark = "ok" if record.status == "SUCCESS" else record.status
    print(f"[kfstack] task {record.name}: {mark} in {record.seconds:.1f} s", file=sys.stderr, flush=True)


def run_pipeline_locally(
    pipeline_name: str,
    arguments: dict[str, Any],
    pipeline_root: str,
    on_task_done: Callable[[TaskRecord], None] = _print_progress,
) -> RunSummary:
    """Runs a registered pipeline with kfp.local on this machine.

    Args:
        pipeline_name: A name from ``kfstack.pipelines.PIPELINES``.
        arguments: Pipeline parameters (``kfstack run --local`` sets ``platform=local``).
        pipeline_root: Directory for the run's artifacts (created if missing).
        on_task_done: Called after every task (live progress).

    Returns:
        The run's summary; ``status`` tells success, the run never raises for a failed task.
    """
    from kfp import local

    from kfstack.pipelines import load_pipeline

    pipeline_func = load_pipeline(pipeline_name)
    os.makedirs(pipeline_root, exist_ok=True)
    # kfp.local warns that our (non-python:*) image is not used by the SubprocessRunner. That is
    # the design: the image holds exactly this package and its pins, which this process has.
    warnings.filterwarnings("ignore", message=".*custom or non-Python base image.*")
    # Display names, accelerators and node selectors only mean something on a cluster.
    warnings.filterwarnings("ignore", message=".*have no effect in the current local runner.*")
    local.init(
        runner=local.SubprocessRunner(use_venv=False),
        pipeline_root=os.path.abspath(pipeline_root),
        raise_on_error=False,
    )
    records: list[TaskRecord] = []
    start = time.perf_counter()
    with _PeakMemorySampler() as memory, _record_tasks(records, on_task_done):
        pipeline_func(**arguments)
    wall = time.perf_counter() - start

    # Every task's outputs, not only the pipeline's: outputs of tasks inside an ExitHandler
    # cannot be pipeline outputs (KFP compiler rule).
    outputs = {name: value for record in records for name, value in record.outputs.items()}
    failed = [r for r in records if r.status != "SUCCESS"]
    metrics, artifacts = _collect_outputs(outputs)
    data = {k: metrics[f"data_report.{k}"] for k in DATA_COUNT_KEYS if f"data_report.{k}" in metrics}
    data.update(
        {
            k.removeprefix("data_report."): v
            for k, v in metrics.items()
            if k.startswith("data_report.quarantined.")
        }
    )
    summary = RunSummary(
        pipeline=pipeline_name,
        status="FAILED" if failed or not records else "SUCCEEDED",
        wall_seconds=round(wall, 2),
        stages=_stage_seconds(records),
        metrics=metrics,
        artifacts=artifacts,
        data=data,
        peak_rss_bytes=memory.peak_bytes,
        pipeline_root=os.path.abspath(pipeline_root),
        arguments=arguments,
    )
    if failed:
        first = failed[0]
        summary.error = f"task {first.name} failed: " + (
            _exception_line(first.log_tail) or "no exception line in its log"
        )
        summary.failed_task_log_tail = first.log_tail
    elif not records:
        summary.error = "the pipeline ran no tasks"
    return summary


def _collect_outputs(outputs: dict[str, Any]) -> tuple[dict[str, float], dict[str, str]]:
    metrics: dict[str, float] = {}
    artifacts: dict[str, str] = {}
    for name, artifact in outputs.items():
        uri = getattr(artifact, "uri", None)
        if uri is None:
            continue
        artifacts[name] = uri
        if getattr(artifact, "schema_title", "") == "system.Metrics":
            for key, value in (artifact.metadata or {}).items():
                if isinstance(value, (int, float)):
                    metrics[f"{name}.{key}"] = float(value)
    return metrics, artifacts
