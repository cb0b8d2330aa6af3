"""Where an embedded run keeps what it leaves behind, and how old runs are removed.

One directory per run under the pipeline root (``runs/`` by default)::

    runs/<pipeline>-20261123-220942/
      .kfstack-run       marker: this directory is a run's (``kfstack clean`` removes only these),
                         with the pipeline and its arguments (``kfstack run --local --resume``)
      summary.json       the run summary, whatever the outcome
      logs/kfp.log       kfp.local's own output (executor inputs, task outputs)
      logs/<task>.log    each task's own output
      artifacts/         kfp.local's pipeline root: <pipeline>-<time>/<task>/<output>
      tmp/               $TMPDIR of every task process; removed when the run ends
      state/             what a step keeps to resume (the embedded tuner's trial journal)

Beside the runs, ``registry/`` is the embedded platform's model registry (which model serves,
and its history: :mod:`kfstack.serving.registry`): it outlives every run. It, and anything else
under the pipeline root without a marker (a user's file), is never touched by ``kfstack clean``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import time
from typing import Any

from kfstack.errors import UsageError

MARKER = ".kfstack-run"
# The marker's "started": the run's start in local time (also the directory name's suffix).
STARTED_FORMAT = "%Y%m%d-%H%M%S"
SUMMARY_FILE = "summary.json"
KFP_LOG = "kfp"
REGISTRY_DIR = "registry"


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
        """A new, empty run directory ``<pipeline_root>/<pipeline>-<YYYYmmdd-HHMMSS>[-n]``.

        Raises:
            UsageError: The pipeline root cannot be created or written.
        """
        stamp = time.strftime(STARTED_FORMAT, time.localtime(clock))
        try:
            os.makedirs(pipeline_root, exist_ok=True)
            for attempt in range(1000):
                name = f"{pipeline}-{stamp}" + (f"-{attempt}" if attempt else "")
                try:
                    os.mkdir(os.path.join(pipeline_root, name))
                    break
                except FileExistsError:
                    continue
            else:
                raise UsageError(f"{pipeline_root}: no free run directory name for {pipeline}-{stamp}")
            run = cls(os.path.abspath(os.path.join(pipeline_root, name)))
            with open(os.path.join(run.path, MARKER), "w", encoding="utf-8") as f:
                json.dump({"pipeline": pipeline, "started": stamp, "arguments": arguments or {}}, f)
            for folder in (run.logs, run.artifacts, run.tmp):
                os.mkdir(folder)
        except OSError as err:
            raise UsageError(f"cannot write to {pipeline_root}: {err.strerror or err}") from err
        return run

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
        os.makedirs(run.tmp, exist_ok=True)
        return run, marker["pipeline"], dict(marker.get("arguments") or {})


def list_runs(pipeline_root: str) -> list[RunDirectory]:
    """The run directories under ``pipeline_root``, oldest first (by their marker's time)."""
    if not os.path.isdir(pipeline_root):
        return []
    runs = []
    for name in os.listdir(pipeline_root):
        run = RunDirectory(os.path.abspath(os.path.join(pipeline_root, name)))
        marker = os.path.join(run.path, MARKER)
        if os.path.isfile(marker):
            runs.append((os.path.getmtime(marker), name, run))
    return [run for _, _, run in sorted(runs)]


def clean_runs(pipeline_root: str, keep: int = 0, dry_run: bool = False) -> list[RunDirectory]:
    """Removes every run directory under ``pipeline_root`` but the newest ``keep``.

    Returns:
        The run directories removed (or that would be, with ``dry_run``).

    Raises:
        UsageError: ``keep`` is negative.
    """
    if keep < 0:
        raise UsageError(f"--keep {keep}: expected a count >= 0")
    runs = list_runs(pipeline_root)
    doomed = runs[: len(runs) - keep] if keep else runs
    if not dry_run:
        for run in doomed:
            shutil.rmtree(run.path)
    return doomed
