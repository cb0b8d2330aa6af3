"""Katib's StdOut metrics collector: the one parser of metric lines in the project.

A trainer prints ``epoch=3 val_auc=0.7120 val_log_loss=0.5100`` (:func:`~kfstack.training.
metrics.katib_line`); Katib v0.19's collector reads the trial's primary container output and
records every ``name=value`` the default filter :data:`DEFAULT_FILTER` finds for a metric the
Experiment names. This module does what its Go code does (``file-metricscollector``,
``parseLogsInTextFormat``), so that the embedded tuner sees exactly the values Katib would:

- a line is looked at only if it *contains* one of the metric names (a substring test);
- every match of the filter on it is a (name, value) pair; names are compared exactly, so
  ``val_auc_smoothed=0.9`` is not ``val_auc``;
- the values keep the order in which they were printed.

One difference, on purpose: a matched value that is not a number (the filter also matches an
empty value, as in ``val_auc=n/a``) is skipped here, where Katib stores the string and fails
later converting it.

:func:`objective_value` then reduces a trial's reports of a metric to one value by its metric
strategy (``min``, ``max``, ``latest``), as Katib's trial controller does for
``status.observation``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Sequence

# Katib v0.19's default StdOut/File filter (pkg/metricscollector common.DefaultFilter).
DEFAULT_FILTER = r"([\w|-]+)\s*=\s*([+-]?\d*(\.\d+)?([Ee][+-]?\d+)?)"
_FILTER = re.compile(DEFAULT_FILTER)


@dataclasses.dataclass(frozen=True)
class MetricReport:
    """One reported value of one metric."""

    name: str
    value: float


def parse_line(line: str, metrics: Sequence[str]) -> list[MetricReport]:
    """The reports of ``metrics`` on one output line, in the order printed."""
    if not any(metric in line for metric in metrics):
        return []
    reports = []
    for match in _FILTER.finditer(line):
        name, raw = match.group(1).strip(), match.group(2).strip()
        if name not in metrics:
            continue
        try:
            reports.append(MetricReport(name, float(raw)))
        except ValueError:
            continue  # an empty or sign-only match: no number was printed
    return reports


def parse_lines(lines: Iterable[str], metrics: Sequence[str]) -> list[MetricReport]:
    """Every report of ``metrics`` in ``lines`` (a trial's whole output), in order."""
    return [report for line in lines for report in parse_line(line, metrics)]


def values_of(reports: Iterable[MetricReport], metric: str) -> list[float]:
    return [r.value for r in reports if r.name == metric]


def objective_value(values: Sequence[float], strategy: str) -> float | None:
    """A metric's value for the trial under Katib's metric strategy; None when never reported
    (Katib then marks the trial ``MetricsUnavailable``, which counts as failed)."""
    if not values:
        return None
    if strategy == "min":
        return min(values)
    if strategy == "max":
        return max(values)
    if strategy == "latest":
        return values[-1]
    raise ValueError(f"unknown metric strategy {strategy!r}")
