"""The tuning step's report: a Markdown table of the trials and an optimisation plot.

Both are read in the KFP UI: the table as a ``Markdown`` artifact, the plot as an ``HTML``
artifact, a self-contained page of inline SVG drawn with :mod:`kfstack.plotting` that names no
URL at all (not even the SVG namespace's).

Both functions are pure: a :class:`~kfstack.tuning.trials.TuningResult` in, text out. Every text
that comes from the run (trial names, parameter values, messages, the run's reason) is escaped.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Iterable, Sequence

from kfstack import plotting
from kfstack.plotting import bar, circle, count_axis, cross, diamond, value_axis
from kfstack.tuning.spec import MAXIMIZE
from kfstack.tuning.trials import (
    EARLY_STOPPED,
    FAILED,
    FAILED_OUTCOMES,
    METRICS_UNAVAILABLE,
    OBSERVED_OUTCOMES,
    SUCCEEDED,
    TrialRecord,
    TuningResult,
)

BEST_MARK = "★"
MISSING = "—"  # a value the trial does not have (not observed, not timed)

# --------------------------------------------------------------------------------------------
# Shared wording
# --------------------------------------------------------------------------------------------


def _number(value: float | None, digits: int) -> str:
    return MISSING if value is None else f"{value:.{digits}f}"


def _parameters_text(trial: TrialRecord, names: Sequence[str]) -> str:
    """``name=value, ...`` in the report's parameter order, then any the order does not name."""
    ordered = [name for name in names if name in trial.parameters]
    ordered += [name for name in trial.parameters if name not in names]
    return ", ".join(f"{name}={trial.parameters[name]}" for name in ordered)


def _counts_text(result: TuningResult) -> str:
    """``5 run: 2 succeeded, 1 early-stopped, 2 failed (1 never reported val_auc)``."""
    parts = [
        f"{result.count(SUCCEEDED)} succeeded",
        f"{result.count(EARLY_STOPPED)} early-stopped",
        f"{result.count(*FAILED_OUTCOMES)} failed",
    ]
    unavailable = result.count(METRICS_UNAVAILABLE)
    if unavailable:
        # Katib counts a trial that never printed the objective as failed; say which they were.
        parts[-1] += f" ({unavailable} never reported {result.objective})"
    # Killed or still running (a run cut short): counted in "run", so name them too.
    others: dict[str, int] = {}
    for trial in result.trials:
        if trial.status not in (SUCCEEDED, EARLY_STOPPED, FAILED, METRICS_UNAVAILABLE):
            others[trial.status] = others.get(trial.status, 0) + 1
    parts += [f"{count} {status}" for status, count in others.items()]
    return f"{len(result.trials)} run: " + ", ".join(parts)


def _is_best(trial: TrialRecord, result: TuningResult) -> bool:
    # By name: Katib's currentOptimalTrial is a summary (name, parameters, metrics), not the same
    # record as the Trial object, so equality of the whole record would miss it.
    return result.best is not None and trial.name == result.best.name


def _parameter_names(result: TuningResult, parameter_names: Sequence[str]) -> list[str]:
    if parameter_names:
        return list(parameter_names)
    # No order given: the order the trials name them in (dicts keep insertion order).
    return list(dict.fromkeys(name for trial in result.trials for name in trial.parameters))


# --------------------------------------------------------------------------------------------
# Markdown
# --------------------------------------------------------------------------------------------

# Characters Markdown acts on inside a cell: the backslash first of all (``\|`` in a message
# would otherwise become an escaped backslash and a bare cell delimiter), the pipe that splits
# cells, and the inline markup and raw HTML a message could start by accident.
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>|&])")
_NEWLINES = re.compile(r"\r\n|\r|\n")


def markdown_text(text: str) -> str:
    """``text`` as literal Markdown that stays on one table row.

    Markdown's active characters are backslash-escaped (CommonMark and GFM escape any ASCII
    punctuation so), and line breaks become ``<br>``, which GFM and the KFP UI's viewer render
    inside a cell, where a raw newline would end the table.
    """
    return _NEWLINES.sub("<br>", _MARKDOWN_SPECIAL.sub(r"\\\1", text.strip()))


def _table_row(cells: Iterable[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def trials_markdown(result: TuningResult, parameter_names: Sequence[str]) -> str:
    """The tuning run as a Markdown document: a headline, then every trial in one table.

    The headline gives the algorithm, the objective and its direction, the best trial with its
    value and parameters, whether the goal was reached, why the run ended (when known) and how
    many trials ran, succeeded, failed and stopped early. The table lists the trials in creation
    order (``#`` is the trial number the optimisation plot's x axis uses): name, status, each
    parameter's value, the objective (4 decimals), the other metrics, the wall time in seconds
    and, when any trial has one, its message. The best trial's name is marked ``★`` and bold.

    Args:
        result: The finished run.
        parameter_names: The tuned parameters, in the order of their columns (the search
            space's order); empty: the order the trials name them in.

    Returns:
        The document, ending with a newline.
    """
    names = _parameter_names(result, parameter_names)
    objective = markdown_text(result.objective)
    lines = [
        f"## Hyperparameter tuning: {markdown_text(result.algorithm)}, "
        f"{markdown_text(result.direction)} {objective}",
        "",
    ]
    best = result.best
    if best is not None:
        parameters = _parameters_text(best, names)
        lines.append(
            f"- **Best trial:** {BEST_MARK} **{markdown_text(best.name)}**, {objective} "
            f"**{_number(best.objective, 4)}**" + (f" ({markdown_text(parameters)})" if parameters else "")
        )
    else:
        lines.append(f"- **Best trial:** none (no trial reported {objective})")
    lines.append(f"- **Goal reached:** {'yes' if result.goal_reached else 'no'}")
    if result.reason:
        lines.append(f"- **Run ended:** {markdown_text(result.reason)}")
    lines += [f"- **Trials:** {markdown_text(_counts_text(result))}", ""]
    if not result.trials:
        return "\n".join([*lines, "No trial ran.", ""])

    # Metrics recorded besides the objective (the trainer's other validation metrics), in the
    # order the trials first report them.
    metric_names = list(
        dict.fromkeys(m for trial in result.trials for m in trial.metrics if m != result.objective)
    )
    with_message = any(trial.message.strip() for trial in result.trials)
    header = ["#", "trial", "status", *names, result.objective, *metric_names, "seconds"]
    # Numbers right-aligned so their decimals line up; words left-aligned.
    alignment = ["---:", ":---", ":---", *[":---"] * len(names), *["---:"] * (len(metric_names) + 2)]
    if with_message:
        header.append("message")
        alignment.append(":---")
    lines += [_table_row(markdown_text(cell) for cell in header), _table_row(alignment)]
    for number, trial in enumerate(result.trials, start=1):
        name = markdown_text(trial.name)
        cells = [
            str(number),
            f"{BEST_MARK} **{name}**" if _is_best(trial, result) else name,
            markdown_text(trial.status),
            *[markdown_text(trial.parameters.get(p, MISSING)) for p in names],
            _number(trial.objective, 4),
            *[_number(trial.metrics.get(m), 4) for m in metric_names],
            _number(trial.seconds, 1),
        ]
        if with_message:
            cells.append(markdown_text(trial.message))
        lines.append(_table_row(cells))
    return "\n".join([*lines, ""])


# --------------------------------------------------------------------------------------------
# HTML: the optimisation plot
# --------------------------------------------------------------------------------------------

SVG_WIDTH = 720
PLOT_LEFT, PLOT_WIDTH = 76, 470
LEGEND_X = PLOT_LEFT + PLOT_WIDTH + 24  # the legend sits right of the plot area
# The objective panel and the smaller per-epoch panel: (top of the plot area, its height).
OBJECTIVE_TOP, OBJECTIVE_HEIGHT = 48, 260
HISTORY_TOP, HISTORY_HEIGHT = 44, 170
AXIS_ROOM = 58  # below the plot area: tick labels and the axis title
# The plot's own style: it may shrink to fit a narrow frame.
SVG_STYLE = "max-width: 100%; height: auto;"

# One colour per outcome, the same in both panels.
COLOURS = {
    SUCCEEDED: "#1f5aa6",
    EARLY_STOPPED: "#e08a00",
    FAILED: "#c0392b",
    "other": "#888888",
}
BEST_SO_FAR_COLOUR = "#2e8b57"
INK = "#222222"


def _observed_value(trial: TrialRecord) -> float | None:
    """The objective as the plot draws it: only trials Katib observed, and only a finite value."""
    if trial.status not in OBSERVED_OUTCOMES or trial.objective is None:
        return None
    return trial.objective if math.isfinite(trial.objective) else None


def _outcome(status: str) -> str:
    """The colour key of a status: metrics-unavailable trials count (and look) as failed."""
    if status in FAILED_OUTCOMES:
        return FAILED
    return status if status in (SUCCEEDED, EARLY_STOPPED) else "other"


def _tip(trial: TrialRecord, number: int, objective: str, value: float | None) -> str:
    parameters = ", ".join(f"{name}={v}" for name, v in trial.parameters.items())
    reading = f"{objective} {value:.4f}" if value is not None else f"no {objective}"
    text = f"#{number} {trial.name} ({trial.status}): {reading}"
    if parameters:
        text += f"; {parameters}"
    if trial.message.strip():
        text += f"; {trial.message.strip()}"
    return text


def best_so_far(values: Sequence[float | None], maximize: bool) -> list[tuple[int, float]]:
    """The corners of the best-so-far step line over trials numbered 1..len(values).

    Args:
        values: Each trial's observed objective, in creation order; None when not observed.
        maximize: Best is the largest value; else the smallest.

    Returns:
        ``(trial number, best value)`` corners: from the first observed trial, a step at each
        trial that improves on the best, on to the last trial. Empty when none was observed.
    """
    corners: list[tuple[int, float]] = []
    best: float | None = None
    for number, value in enumerate(values, start=1):
        if value is None:
            continue
        if best is None:
            best = value
            corners.append((number, value))
        elif (value > best) if maximize else (value < best):
            corners += [(number, best), (number, value)]
            best = value
    if best is not None and corners[-1][0] != len(values):
        # Carry the level on past the last improvement, so the line spans the whole run.
        corners.append((len(values), best))
    return corners


def _objective_svg(result: TuningResult) -> str:
    """The objective of each trial by trial number, with the best-so-far line."""
    values = [_observed_value(trial) for trial in result.trials]
    observed = [v for v in values if v is not None]
    maximize = result.direction == MAXIMIZE
    bottom = OBJECTIVE_TOP + OBJECTIVE_HEIGHT
    x = count_axis(len(result.trials), PLOT_LEFT, PLOT_LEFT + PLOT_WIDTH)
    y = value_axis(observed, bottom, OBJECTIVE_TOP)
    height = bottom + AXIS_ROOM
    title = f"{result.objective} by trial ({result.direction}, {result.algorithm})"
    parts = [
        *plotting.svg_start(SVG_WIDTH, height, "objective", title, style=SVG_STYLE),
        plotting.headline(PLOT_LEFT + PLOT_WIDTH / 2, 24, title),
        *plotting.frame(x, y, "trial (creation order)", result.objective),
    ]
    corners = best_so_far(values, maximize)
    if corners:
        points = " ".join(f"{x(n):.2f},{y(v):.2f}" for n, v in corners)
        parts.append(
            f"<polyline points='{points}' fill='none' stroke='{BEST_SO_FAR_COLOUR}' stroke-width='2' "
            "stroke-linejoin='round' class='best-so-far'/>"
        )
    shown: set[str] = set()
    best_ring = ""
    for number, (trial, value) in enumerate(zip(result.trials, values, strict=True), start=1):
        tip = _tip(trial, number, result.objective, value)
        outcome = _outcome(trial.status)
        colour = COLOURS[outcome]
        if value is not None and trial.status == EARLY_STOPPED:
            parts.append(diamond(x(number), y(value), colour, "point early-stopped", tip))
            shown.add("early-stopped")
        elif value is not None:
            parts.append(circle(x(number), y(value), colour, "point succeeded", tip))
            shown.add("succeeded")
        elif outcome == FAILED:
            # No value to place: a mark on the x axis, so the trial still shows where it ran.
            parts.append(cross(x(number), bottom, colour, "mark failed", tip))
            shown.add("failed")
        else:
            parts.append(bar(x(number), bottom, colour, "mark no-value", tip))
            shown.add("no-value")
        if value is not None and _is_best(trial, result):
            best_ring = (
                f"<circle cx='{x(number):.2f}' cy='{y(value):.2f}' r='10' fill='none' stroke='{INK}' "
                f"stroke-width='1.5' class='best'><title>{html.escape('best trial: ' + tip)}</title></circle>"
            )
    if best_ring:
        parts.append(best_ring)
    entries = [
        (circle(0, 0, COLOURS[SUCCEEDED], "key", "succeeded"), "succeeded", "succeeded"),
        (diamond(0, 0, COLOURS[EARLY_STOPPED], "key", "early-stopped"), "early-stopped", "early-stopped"),
        (cross(0, 0, COLOURS[FAILED], "key", "failed"), "failed (no value)", "failed"),
        (bar(0, 0, COLOURS["other"], "key", "no value"), "no value", "no-value"),
    ]
    legend = [(marker, label) for marker, label, key in entries if key in shown]
    legend.append(
        (
            f"<line x1='-8' y1='0' x2='8' y2='0' stroke='{BEST_SO_FAR_COLOUR}' stroke-width='2'/>",
            f"best so far ({'max' if maximize else 'min'})",
        )
    )
    if best_ring:
        legend.append((f"<circle r='8' fill='none' stroke='{INK}' stroke-width='1.5'/>", "best trial"))
    parts += [*plotting.legend(legend, LEGEND_X, OBJECTIVE_TOP + 8), "</svg>"]
    return "\n".join(parts)


def _history_svg(result: TuningResult) -> str:
    """The objective per epoch, one line per trial that reported any; empty when none did."""
    curves = []
    for number, trial in enumerate(result.trials, start=1):
        points = [(epoch, v) for epoch, v in enumerate(trial.history, start=1) if math.isfinite(v)]
        if points:
            curves.append((number, trial, points))
    if not curves:
        return ""
    bottom = HISTORY_TOP + HISTORY_HEIGHT
    epochs = max(epoch for _n, _t, points in curves for epoch, _v in points)
    x = count_axis(epochs, PLOT_LEFT, PLOT_LEFT + PLOT_WIDTH)
    y = value_axis([v for _n, _t, points in curves for _e, v in points], bottom, HISTORY_TOP)
    height = bottom + AXIS_ROOM
    title = f"{result.objective} per epoch"
    parts = [
        *plotting.svg_start(SVG_WIDTH, height, "history", title, style=SVG_STYLE),
        plotting.headline(PLOT_LEFT + PLOT_WIDTH / 2, 22, title, size=13),
        *plotting.frame(x, y, "epoch", result.objective),
    ]
    shown: dict[str, str] = {}
    for number, trial, points in curves:
        outcome = _outcome(trial.status)
        colour = COLOURS[outcome]
        css = {SUCCEEDED: "succeeded", EARLY_STOPPED: "early-stopped", FAILED: "failed"}.get(outcome, "other")
        shown.setdefault(css, colour)
        tip = f"#{number} {trial.name} ({trial.status}): {len(trial.history)} epoch(s)"
        coordinates = " ".join(f"{x(e):.2f},{y(v):.2f}" for e, v in points)
        end_x, end_y = x(points[-1][0]), y(points[-1][1])
        parts += [
            f"<polyline points='{coordinates}' fill='none' stroke='{colour}' stroke-width='1.5' "
            f"stroke-opacity='0.8' class='epoch-curve {css}'><title>{html.escape(tip)}</title></polyline>",
            # A dot where each curve ends: where an early-stopped trial was stopped, and the only
            # thing a one-epoch curve would show.
            circle(end_x, end_y, colour, f"curve-end {css}", tip, radius=2.5),
        ]
    legend = [
        (f"<line x1='-8' y1='0' x2='8' y2='0' stroke='{colour}' stroke-width='2'/>", css)
        for css, colour in shown.items()
    ]
    parts += [*plotting.legend(legend, LEGEND_X, HISTORY_TOP + 8), "</svg>"]
    return "\n".join(parts)


def optimisation_plot_html(result: TuningResult) -> str:
    """The tuning run as one self-contained HTML page of inline SVG.

    The first panel plots each trial's objective by trial number (creation order): succeeded
    trials as filled circles, early-stopped ones as hollow diamonds of another colour, failed
    trials (metrics unavailable included) as crosses on the x axis, and the best-so-far step line
    (the running max when maximising, min when minimising); the best trial is ringed. When trials
    reported the objective per epoch, a second panel draws one line per trial (an early-stopped
    trial's line ends where it was stopped). The page loads nothing and runs no script.

    Args:
        result: The finished run.

    Returns:
        The page. When no trial reported the objective, it says so in place of the first panel.
    """
    heading = f"Hyperparameter tuning: {result.algorithm}, {result.direction} {result.objective}"
    if result.best is not None:
        summary = f"Best trial: {result.best.name}, {result.objective} {_number(result.best.objective, 4)}"
    else:
        summary = "Best trial: none"
    summary += f". Goal reached: {'yes' if result.goal_reached else 'no'}."
    if result.reason:
        summary += f" Run ended: {result.reason}."
    summary += f" Trials: {_counts_text(result)}."
    if any(v is not None for v in map(_observed_value, result.trials)):
        body = _objective_svg(result)
    else:
        body = (
            "<p class='no-data' style='font-size: 14px; color: #c0392b;'>"
            f"{html.escape(f'No trial reported the objective {result.objective}: nothing to plot.')}</p>"
        )
    history = _history_svg(result)
    return plotting.html_page(
        heading,
        [
            f"<p class='summary' style='font-size: 13px;'>{html.escape(summary)}</p>",
            body,
            *([history] if history else []),
        ],
    )
