"""The summary of an embedded run: what ``kfstack run --local`` prints and writes as JSON.

It tells the truth: every path it lists exists on disk, metric values are under ``metrics``
(KFP keeps Metrics and ClassificationMetrics artifacts as metadata, not files), whole numbers are
integers, a metric undefined on this data is ``null`` (printed ``undefined``), and every
effective parameter of the run is recorded, defaults included.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

from kfstack.contracts import REPORT_PATH_ENV
from kfstack.training.metrics import UNDEFINED

SUCCEEDED, FAILED, CANCELLED = "SUCCEEDED", "FAILED", "CANCELLED"
# A stage answered from the step cache (kfstack.app.step_cache): it ran in an earlier run.
CACHED = "CACHED"
METRICS_SCHEMA = "system.Metrics"
# Where a Spark job's counts show up among the metrics (the spark_job step's report output).
DATA_REPORT = "report"
DATA_COUNT_KEYS = ("rows_read", "rows_written", "rows_quarantined", "quarantined_fraction")
# Where the tuning step's figures show up among the metrics, and its one parameter output.
TUNING_METRICS = "tuning_metrics"
BEST_HYPERPARAMETERS = "best_hyperparameters"
TUNING_COUNTS = ("trials_run", "trials_succeeded", "trials_early_stopped", "trials_failed")
# The deployment step's parameter output with the summary's `serving` entry (JSON).
SERVING_SUMMARY = "serving_summary"
# Report artifacts whose metadata is a summary entry: the drift check's `drift`, the
# champion/challenger gate's `gate`.
DRIFT_REPORT = "drift_report"
GATE_REPORT = "gate_report"

Number = int | float


@dataclasses.dataclass
class StageRecord:
    """One task of the run: its outcome (``CACHED`` when the step cache answered it), seconds
    (all attempts), its own log file and, when cached, the run directory that computed it."""

    status: str
    seconds: float
    log: str
    cached_from: str = ""


@dataclasses.dataclass
class RunSummary:
    """What ``kfstack run --local`` prints and writes (``<run_dir>/summary.json``).

    Attributes:
        pipeline: Pipeline name.
        status: ``SUCCEEDED``, ``FAILED`` or ``CANCELLED`` (Ctrl-C).
        run_dir: The run's directory (logs, artifacts, this summary).
        wall_seconds: Wall time of the whole run.
        peak_rss_bytes: Peak resident memory summed over this process and all its children.
        arguments: Every parameter of the run, defaults included.
        stages: Task name -> outcome, seconds and log, in execution order.
        data: Row counts of the feature job (read / written / quarantined, per reason).
        data_unreported: Why ``data`` is empty although the data step finished (its
            application wrote no report, or one without row counts); empty otherwise
            (:func:`unreported_data`).
        metrics: ``<output>.<metric>`` of every Metrics output; None where undefined.
        artifacts: Output name -> path, for every output that is a file or directory.
        kfp_log: kfp.local's own output (executor inputs, task outputs).
        error: The failing task and its exception line, when the run failed or was cancelled.
        failed_task_log_tail: Last lines of the failing task's own log.
        tuning: The tuning step's outcome when the pipeline has one: algorithm, trial counts,
            best parameters and best objective (``{"tuned": false}`` when it was skipped).
        serving: The deployment step's outcome when it finished: mode, decision, the model
            versions (rolled out, previous, in production) and the compared canary figures.
        drift: A retraining run's drift check: decision (retrain or skip) and why, per-feature
            PSI, the label rates and the production model compared with.
        gate: A retraining run's champion/challenger gate: both models' figures on the new
            window's holdout, the rule and the decision.
        tracking: Where the run was tracked in MLflow (``uri``, ``experiment``, the parent
            ``run_id``) and, where the server failed, the first ``error`` and what was
            ``not_tracked``; ``{"off": why}`` for a run not tracked
            (:mod:`kfstack.tracking.embedded`).
    """

    pipeline: str
    status: str
    run_dir: str
    wall_seconds: float
    peak_rss_bytes: int
    arguments: dict[str, Any]
    stages: dict[str, StageRecord]
    data: dict[str, Number]
    metrics: dict[str, Number | None]
    artifacts: dict[str, str]
    kfp_log: str
    error: str | None = None
    failed_task_log_tail: list[str] = dataclasses.field(default_factory=list)
    tuning: dict[str, Any] | None = None
    serving: dict[str, Any] | None = None
    drift: dict[str, Any] | None = None
    gate: dict[str, Any] | None = None
    data_unreported: str = ""
    tracking: dict[str, Any] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def write_json(self, path: str) -> None:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.to_dict(), f, indent=2)  # stages keep their execution order

    def render(self) -> str:
        """A human-readable summary for the terminal."""
        lines = [
            f"pipeline   {self.pipeline}",
            f"status     {self.status}",
            f"run dir    {self.run_dir}",
            f"wall time  {self.wall_seconds:.1f} s",
            f"peak RSS   {self.peak_rss_bytes / 2**30:.2f} GiB (all processes)",
            "stages:",
            *(
                f"  {name:<28} {stage.status:<10} {stage.seconds:8.1f} s"
                + (f"  (outputs of {os.path.basename(stage.cached_from)})" if stage.cached_from else "")
                for name, stage in self.stages.items()
            ),
        ]
        if self.tuning and self.tuning.get("tuned"):
            t = self.tuning
            lines.append(
                f"tuning     {t['algorithm']}: {t['trials_run']} trials ({t['trials_early_stopped']} stopped "
                f"early, {t['trials_failed']} failed); best {t['best_objective']} with {t['best_parameters']}"
            )
        if self.drift:
            lines.append(f"drift      {self.drift['decision']}: {self.drift['reason']}")
        if self.gate:
            lines.append(f"gate       {self.gate['decision']}: {self.gate['reason']}")
        if self.serving and self.serving.get("mode"):
            v = self.serving
            lines.append(
                f"serving    {v['mode']}: {v['decision']} {v['model_version']}; in production: "
                f"{v['production_version']}"
                + (f" (failed checks: {', '.join(v['failed_checks'])})" if v.get("failed_checks") else "")
            )
            lines += [f"  caution: {caution}" for caution in v.get("cautions", [])]
        if self.data_unreported:
            lines.append(f"data       {self.data_unreported}")
        for title, values in (("data", self.data), ("metrics", self.metrics)):
            if values:
                lines.append(f"{title}:")
                lines += [f"  {key:<40} {_fmt(value)}" for key, value in values.items()]
        lines += _tracking_lines(self.tracking)
        if self.artifacts:
            lines.append("artifacts:")
            lines += [f"  {name:<20} {path}" for name, path in self.artifacts.items()]
        if self.error:
            lines += ["error:", f"  {self.error}"]
            if self.failed_task_log_tail:
                lines.append("log tail of that task:")
                lines += [f"  {line}" for line in self.failed_task_log_tail]
        return "\n".join(lines)


def _tracking_lines(tracking: dict[str, Any]) -> list[str]:
    if not tracking:
        return []
    if "off" in tracking:
        return [f"tracking   off: {tracking['off']}"]
    lines = [f"tracking   {tracking['uri']}, experiment {tracking['experiment']}, run {tracking['run_id']}"]
    if tracking.get("error"):
        lines.append(
            f"  not tracked after {tracking['error']}: {', '.join(tracking.get('not_tracked', []))} "
            "(the run itself went on)"
        )
    return lines


def _fmt(value: Number | None) -> str:
    if value is None:
        return UNDEFINED
    if isinstance(value, float):
        # Four significant digits where four decimals would print a small figure (a local
        # run's cost per epoch) as 0.
        return f"{value:.4g}" if 0 < abs(value) < 1e-3 else f"{value:.4f}"
    return f"{value:,}"


def _number(value: Any) -> Number | None:
    """A metric value as JSON wants it: whole numbers as int, undefined as None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return int(value) if float(value).is_integer() else float(value)


def collect_outputs(outputs: dict[str, Any]) -> tuple[dict[str, Number | None], dict[str, str]]:
    """Metrics and on-disk artifact paths of the tasks' outputs (as kfp.local returns them).

    Metrics artifacts contribute their metadata (``<output>.<metric>``, ``undefined`` as None);
    an artifact is listed only when its path exists.
    """
    metrics: dict[str, Number | None] = {}
    artifacts: dict[str, str] = {}
    for name, artifact in outputs.items():
        path = getattr(artifact, "path", None)
        if path is None:
            continue  # a parameter output
        if os.path.exists(path):
            artifacts[name] = path
        if getattr(artifact, "schema_title", "") == METRICS_SCHEMA:
            for key, value in sorted((artifact.metadata or {}).items()):
                if value == UNDEFINED or isinstance(value, (int, float)):
                    metrics[f"{name}.{key}"] = _number(value)
    return metrics, artifacts


def data_counts(metrics: dict[str, Number | None]) -> dict[str, Number]:
    """The feature job's row counts (read / written / quarantined, per reason), out of its
    ``report`` metrics."""
    prefix = f"{DATA_REPORT}."
    data: dict[str, Number] = {}
    reasons = sorted(key for key in metrics if key.startswith(f"{prefix}quarantined."))
    for key in [*(prefix + name for name in DATA_COUNT_KEYS), *reasons]:
        value = metrics.get(key)
        if value is not None:
            data[key.removeprefix(prefix)] = value
    return data


def unreported_data(outputs: dict[str, Any]) -> str:
    """What the summary says where the data step finished without row counts: its application
    wrote no report to ``KFSTACK_REPORT_PATH`` (a report is optional, so the step succeeds), or a
    report with none of the counts. Empty where the counts are there, or where no data step
    finished (its ``report`` output is then absent).

    A run's summary must not pass over that in silence: an empty ``data`` section reads as "no
    rows" or as nothing at all.
    """
    report = outputs.get(DATA_REPORT)
    if report is None or getattr(report, "schema_title", "") != METRICS_SCHEMA:
        return ""
    numbers = {key for key, value in (report.metadata or {}).items() if _number(value) is not None}
    counts = ", ".join(DATA_COUNT_KEYS[:3])
    if not numbers:
        return (
            f"no row counts: the data step's application wrote no report to ${REPORT_PATH_ENV} "
            f'(a JSON object such as {{"rows_read": 1000, "rows_written": 997}}; docs/contracts.md)'
        )
    if not numbers & {*DATA_COUNT_KEYS, *(key for key in numbers if key.startswith("quarantined."))}:
        return (
            f"no row counts: the data step's report (${REPORT_PATH_ENV}) has {', '.join(sorted(numbers))} "
            f"and none of {counts}"
        )
    return ""


def tuning_summary(
    arguments: dict[str, Any], metrics: dict[str, Number | None], outputs: dict[str, Any]
) -> dict[str, Any] | None:
    """The tuning step's outcome out of its ``tuning_metrics`` and its parameter outputs; None
    when the run has no tuning step (or it did not finish)."""
    prefix = f"{TUNING_METRICS}."
    figures = {key.removeprefix(prefix): value for key, value in metrics.items() if key.startswith(prefix)}
    if not figures:
        return None
    if not arguments.get("tune", True):
        return {"tuned": False}
    best = {name.removeprefix("best_"): value for name, value in figures.items() if name.startswith("best_")}
    return {
        "tuned": True,
        "algorithm": arguments.get("tuning_algorithm"),
        **{name: figures.get(name) for name in TUNING_COUNTS},
        "best_parameters": best_parameters(arguments, outputs),
        "best_objective": best,
    }


def best_parameters(arguments: dict[str, Any], outputs: dict[str, Any]) -> dict[str, Any]:
    """The tuned hyperparameters' best values: those of the tuning step's ``best_hyperparameters``
    its search space names (the others are the run's own values, handed on)."""
    best = outputs.get(BEST_HYPERPARAMETERS)
    try:
        searched = json.loads(arguments.get("tuning_search_space") or "{}")
    except ValueError:
        searched = {}
    if not isinstance(best, dict) or not isinstance(searched, dict):
        return {}
    return {name: _as_searched(best[name], searched[name]) for name in searched if name in best}


def _as_searched(value: Any, space: Any) -> Any:
    """``value`` of the type its search space gives (a parameter output carries every number as
    a float: an int hyperparameter came back as ``49.0``)."""
    if not (isinstance(value, float) and value.is_integer() and isinstance(space, dict)):
        return value
    values = space.get("values") or []
    whole = space.get("type") == "int" or (
        space.get("type") in ("discrete", "categorical")
        and values
        and all(isinstance(v, int) and not isinstance(v, bool) for v in values)
    )
    return int(value) if whole else value


def serving_summary(outputs: dict[str, Any]) -> dict[str, Any] | None:
    """The deployment step's ``serving`` entry out of its parameter output; None when the run
    has no deployment step (or it did not run or finish)."""
    text = outputs.get(SERVING_SUMMARY)
    return json.loads(text) if isinstance(text, str) and text else None


def report_entry(outputs: dict[str, Any], name: str) -> dict[str, Any] | None:
    """A summary entry a step wrote as its report artifact's metadata (:data:`DRIFT_REPORT`,
    :data:`GATE_REPORT`); None when the run has no such step, or it did not run or finish."""
    metadata = getattr(outputs.get(name), "metadata", None)
    return dict(metadata) if metadata else None
