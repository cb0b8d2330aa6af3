"""The tuning step's report: a Markdown table of the trials and an optimisation plot.

Both are read in the KFP UI: the table as a ``Markdown`` artifact, the plot as an ``HTML``
artifact. The UI shows an HTML artifact in a sandboxed frame, and a cluster may have no way out
to the internet, so the page loads nothing -- no script, stylesheet, font or image, not even the
SVG namespace URL (an HTML parser puts an inline ``<svg>`` in the SVG namespace by itself) -- and
draws with inline SVG only. The page is also well-formed XML (void elements closed), so a test or
a tool can parse it with :mod:`xml.etree`.

Both functions are pure: a :class:`~kfstack.tuning.trials.TuningResult` in, text out. Every text
that comes from the run (trial names, parameter values, messages, the run's reason) is escaped.
"""

from __future__ import annotations

import dataclasses
import html
import math
import re
from collections.abc import Iterable, Sequence

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

FONT = "font-family='sans-serif'"
SVG_WIDTH = 720
PLOT_LEFT, PLOT_WIDTH = 76, 470
LEGEND_X = PLOT_LEFT + PLOT_WIDTH + 24  # the legend sits right of the plot area
# The objective panel and the smaller per-epoch panel: (top of the plot area, its height).
OBJECTIVE_TOP, OBJECTIVE_HEIGHT = 48, 260
HISTORY_TOP, HISTORY_HEIGHT = 44, 170
AXIS_ROOM = 58  # below the plot area: tick labels and the axis title

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


def _nice_step(raw: float) -> float:
    """The smallest of 1, 2, 2.5, 5 times a power of ten that is at least ``raw`` (> 0)."""
    magnitude = 10.0 ** math.floor(math.log10(raw))
    for multiple in (1.0, 2.0, 2.5, 5.0):
        if raw <= multiple * magnitude * (1 + 1e-9):
            return multiple * magnitude
    return 10.0 * magnitude


def _decimals(step: float) -> int:
    """Decimals that tell ticks ``step`` apart (0.025 -> 3, 0.02 -> 2, 5 -> 0)."""
    digits = max(0, -math.floor(math.log10(step) + 1e-9))
    return digits if abs(round(step * 10**digits) - step * 10**digits) < 1e-6 else digits + 1


@dataclasses.dataclass(frozen=True)
class _Axis:
    """A linear map from data ``[low, high]`` to pixels ``[start, end]``, and its ticks.

    A vertical axis maps upwards (``start`` is the bottom pixel): SVG's y grows downwards.
    """

    low: float
    high: float
    start: float
    end: float
    ticks: tuple[float, ...]
    labels: tuple[str, ...]

    def __call__(self, value: float) -> float:
        return self.start + (value - self.low) / (self.high - self.low) * (self.end - self.start)


def _value_axis(values: Sequence[float], start: float, end: float) -> _Axis:
    """An axis around ``values`` (finite, at least one) with about five round ticks.

    Never of zero span: equal values (or one value) get a window around them.
    """
    low, high = min(values), max(values)
    size = max(abs(low), abs(high))
    if high - low <= 1e-9 * size:
        # Equal values, or a spread below float precision at this magnitude: 5% either side.
        pad = size * 0.05 or 0.5
    else:
        pad = (high - low) * 0.08  # keep points off the frame
    low, high = low - pad, high + pad
    step = _nice_step((high - low) / 5)
    first, last = math.floor(low / step), math.ceil(high / step)
    if last <= first or last - first > 50:  # float trouble at huge magnitudes: no round ticks
        ticks = [low, high]
        digits = 6
    else:
        low, high = first * step, last * step
        ticks = [k * step for k in range(first, last + 1)]
        digits = _decimals(step)
    # `+ 0.0` turns a rounded -0.0 into 0.0, so no tick reads "-0.00".
    labels = tuple(f"{round(t, digits) + 0.0:.{digits}f}" for t in ticks)
    return _Axis(low, high, start, end, tuple(ticks), labels)


def _count_axis(count: int, start: float, end: float) -> _Axis:
    """An axis of the whole numbers 1..count (trials, epochs), half a unit of room each side."""
    # About ten ticks, on whole steps of 1, 2, 5, 10, ... (round(2.5) is 2).
    step = max(1, round(_nice_step(count / 10)))
    ticks = [1, *range(step, count + 1, step)] if step > 1 else list(range(1, count + 1))
    return _Axis(0.5, count + 0.5, start, end, tuple(float(t) for t in ticks), tuple(map(str, ticks)))


def _frame(x: _Axis, y: _Axis, x_title: str, y_title: str) -> list[str]:
    """The plot area: frame, grid lines, tick marks and labels, and the two axis titles."""
    left, right, top, bottom = x.start, x.end, y.end, y.start
    parts = [
        f"<rect x='{left:.1f}' y='{top:.1f}' width='{right - left:.1f}' height='{bottom - top:.1f}' "
        "fill='white' stroke='#444444' class='plot-area'/>"
    ]
    for tick, label in zip(x.ticks, x.labels, strict=True):
        px = x(tick)
        parts += [
            f"<line x1='{px:.1f}' y1='{top:.1f}' x2='{px:.1f}' y2='{bottom:.1f}' stroke='#eeeeee'/>",
            f"<line x1='{px:.1f}' y1='{bottom:.1f}' x2='{px:.1f}' y2='{bottom + 5:.1f}' stroke='#444444'/>",
            f"<text x='{px:.1f}' y='{bottom + 18:.1f}' text-anchor='middle' font-size='11' {FONT} "
            f"class='x-tick'>{html.escape(label)}</text>",
        ]
    for tick, label in zip(y.ticks, y.labels, strict=True):
        py = y(tick)
        parts += [
            f"<line x1='{left:.1f}' y1='{py:.1f}' x2='{right:.1f}' y2='{py:.1f}' stroke='#eeeeee'/>",
            f"<line x1='{left - 5:.1f}' y1='{py:.1f}' x2='{left:.1f}' y2='{py:.1f}' stroke='#444444'/>",
            f"<text x='{left - 8:.1f}' y='{py + 4:.1f}' text-anchor='end' font-size='11' {FONT} "
            f"class='y-tick'>{html.escape(label)}</text>",
        ]
    y_title_x, y_title_y = left - 60, (top + bottom) / 2
    parts += [
        f"<text x='{(left + right) / 2:.1f}' y='{bottom + 40:.1f}' text-anchor='middle' font-size='12' "
        f"{FONT}>{html.escape(x_title)}</text>",
        f"<text x='{y_title_x:.1f}' y='{y_title_y:.1f}' text-anchor='middle' font-size='12' "
        f"transform='rotate(-90 {y_title_x:.1f} {y_title_y:.1f})' {FONT}>{html.escape(y_title)}</text>",
    ]
    return parts


# Markers. Each carries a <title>: the browser shows it as a tooltip, and it names the trial.


def _circle(x: float, y: float, colour: str, css_class: str, tip: str, radius: float = 5.0) -> str:
    return (
        f"<circle cx='{x:.2f}' cy='{y:.2f}' r='{radius:g}' fill='{colour}' stroke='{colour}' "
        f"class='{css_class}'><title>{html.escape(tip)}</title></circle>"
    )


def _diamond(x: float, y: float, colour: str, css_class: str, tip: str, size: float = 6.0) -> str:
    # Hollow, so an early-stopped trial reads apart from a succeeded one even without colour.
    points = f"{x:.2f},{y - size:.2f} {x + size:.2f},{y:.2f} {x:.2f},{y + size:.2f} {x - size:.2f},{y:.2f}"
    return (
        f"<polygon points='{points}' fill='white' stroke='{colour}' stroke-width='2' "
        f"class='{css_class}'><title>{html.escape(tip)}</title></polygon>"
    )


def _cross(x: float, y: float, colour: str, css_class: str, tip: str, size: float = 5.0) -> str:
    path = (
        f"M {x - size:.2f} {y - size:.2f} L {x + size:.2f} {y + size:.2f} "
        f"M {x - size:.2f} {y + size:.2f} L {x + size:.2f} {y - size:.2f}"
    )
    return (
        f"<path d='{path}' stroke='{colour}' stroke-width='2' fill='none' "
        f"class='{css_class}'><title>{html.escape(tip)}</title></path>"
    )


def _bar(x: float, y: float, colour: str, css_class: str, tip: str, size: float = 6.0) -> str:
    return (
        f"<line x1='{x:.2f}' y1='{y - size:.2f}' x2='{x:.2f}' y2='{y + size:.2f}' stroke='{colour}' "
        f"stroke-width='2' class='{css_class}'><title>{html.escape(tip)}</title></line>"
    )


def _legend(entries: Sequence[tuple[str, str]], top: float) -> list[str]:
    """A column of (marker markup at the origin, label) entries right of the plot area."""
    parts = [f"<g class='legend' transform='translate({LEGEND_X} {top:.1f})'>"]
    for index, (marker, label) in enumerate(entries):
        y = index * 20
        parts += [
            f"<g transform='translate(8 {y})'>{marker}</g>",
            f"<text x='22' y='{y + 4}' font-size='12' {FONT}>{html.escape(label)}</text>",
        ]
    parts.append("</g>")
    return parts


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
    x = _count_axis(len(result.trials), PLOT_LEFT, PLOT_LEFT + PLOT_WIDTH)
    y = _value_axis(observed, bottom, OBJECTIVE_TOP)
    height = bottom + AXIS_ROOM
    title = f"{result.objective} by trial ({result.direction}, {result.algorithm})"
    parts = [
        f"<svg width='{SVG_WIDTH}' height='{height}' viewBox='0 0 {SVG_WIDTH} {height}' role='img' "
        "class='objective' style='max-width: 100%; height: auto;'>",
        f"<title>{html.escape(title)}</title>",
        f"<text x='{PLOT_LEFT + PLOT_WIDTH / 2:.1f}' y='24' text-anchor='middle' font-size='14' "
        f"font-weight='bold' {FONT}>{html.escape(title)}</text>",
        *_frame(x, y, "trial (creation order)", result.objective),
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
            parts.append(_diamond(x(number), y(value), colour, "point early-stopped", tip))
            shown.add("early-stopped")
        elif value is not None:
            parts.append(_circle(x(number), y(value), colour, "point succeeded", tip))
            shown.add("succeeded")
        elif outcome == FAILED:
            # No value to place: a mark on the x axis, so the trial still shows where it ran.
            parts.append(_cross(x(number), bottom, colour, "mark failed", tip))
            shown.add("failed")
        else:
            parts.append(_bar(x(number), bottom, colour, "mark no-value", tip))
            shown.add("no-value")
        if value is not None and _is_best(trial, result):
            best_ring = (
                f"<circle cx='{x(number):.2f}' cy='{y(value):.2f}' r='10' fill='none' stroke='{INK}' "
                f"stroke-width='1.5' class='best'><title>{html.escape('best trial: ' + tip)}</title></circle>"
            )
    if best_ring:
        parts.append(best_ring)
    entries = [
        (_circle(0, 0, COLOURS[SUCCEEDED], "key", "succeeded"), "succeeded", "succeeded"),
        (_diamond(0, 0, COLOURS[EARLY_STOPPED], "key", "early-stopped"), "early-stopped", "early-stopped"),
        (_cross(0, 0, COLOURS[FAILED], "key", "failed"), "failed (no value)", "failed"),
        (_bar(0, 0, COLOURS["other"], "key", "no value"), "no value", "no-value"),
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
    parts += [*_legend(legend, OBJECTIVE_TOP + 8), "</svg>"]
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
    x = _count_axis(epochs, PLOT_LEFT, PLOT_LEFT + PLOT_WIDTH)
    y = _value_axis([v for _n, _t, points in curves for _e, v in points], bottom, HISTORY_TOP)
    height = bottom + AXIS_ROOM
    title = f"{result.objective} per epoch"
    parts = [
        f"<svg width='{SVG_WIDTH}' height='{height}' viewBox='0 0 {SVG_WIDTH} {height}' role='img' "
        "class='history' style='max-width: 100%; height: auto;'>",
        f"<title>{html.escape(title)}</title>",
        f"<text x='{PLOT_LEFT + PLOT_WIDTH / 2:.1f}' y='22' text-anchor='middle' font-size='13' "
        f"font-weight='bold' {FONT}>{html.escape(title)}</text>",
        *_frame(x, y, "epoch", result.objective),
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
            _circle(end_x, end_y, colour, f"curve-end {css}", tip, radius=2.5),
        ]
    legend = [
        (f"<line x1='-8' y1='0' x2='8' y2='0' stroke='{colour}' stroke-width='2'/>", css)
        for css, colour in shown.items()
    ]
    parts += [*_legend(legend, HISTORY_TOP + 8), "</svg>"]
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
    return "\n".join(
        [
            "<!DOCTYPE html>",
            "<html lang='en'>",
            "<head>",
            # Closed, like every void element here, so the page is also well-formed XML.
            "<meta charset='utf-8'/>",
            f"<title>{html.escape(heading)}</title>",
            "</head>",
            "<body style='font-family: sans-serif; margin: 16px;'>",
            f"<h1 style='font-size: 18px;'>{html.escape(heading)}</h1>",
            f"<p class='summary' style='font-size: 13px;'>{html.escape(summary)}</p>",
            body,
            *([history] if history else []),
            "</body>",
            "</html>",
            "",
        ]
    )
