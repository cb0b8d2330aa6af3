"""The tuning report: the trials table reads right for either direction, the plot is self-contained
well-formed SVG whose best-so-far line moves the right way and whose outcomes look apart."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from typing import ClassVar

import pytest

from kfstack.tuning.report import BEST_MARK, best_so_far, optimisation_plot_html, trials_markdown
from kfstack.tuning.trials import (
    EARLY_STOPPED,
    FAILED,
    KILLED,
    METRICS_UNAVAILABLE,
    SUCCEEDED,
    TrialRecord,
    TuningResult,
)

PARAMETERS = ("learning_rate", "batch_size")


def trial(
    number: int,
    status: str,
    objective: float | None = None,
    *,
    history: list[float] | None = None,
    message: str = "",
    seconds: float | None = 12.34,
) -> TrialRecord:
    return TrialRecord(
        name=f"trial-{number}",
        parameters={"learning_rate": f"0.00{number}", "batch_size": str(512 * number)},
        status=status,
        objective=objective,
        metrics={} if objective is None else {"val_auc": objective, "val_logloss": 0.5 + number / 100},
        history=history or [],
        seconds=seconds,
        message=message,
    )


def run(direction: str, trials: list[TrialRecord], **overrides) -> TuningResult:
    """A result whose best is the right one for ``direction`` (as Katib would report it)."""
    observed = [t for t in trials if t.status in (SUCCEEDED, EARLY_STOPPED) and t.objective is not None]
    pick = max if direction == "maximize" else min
    best = pick(observed, key=lambda t: t.objective) if observed else None
    arguments = {"algorithm": "tpe", "objective": "val_auc", "direction": direction, "trials": trials}
    return TuningResult(**{**arguments, "best": best, **overrides})


def mixed_trials() -> list[TrialRecord]:
    """Succeeded, early-stopped, failed and metrics-unavailable trials; the extremes differ."""
    return [
        trial(1, SUCCEEDED, 0.7100, history=[0.65, 0.69, 0.70, 0.71]),
        trial(2, SUCCEEDED, 0.8123, history=[0.70, 0.78, 0.80, 0.8123]),
        trial(3, EARLY_STOPPED, 0.6400, history=[0.60, 0.64], message="stopped by medianstop at epoch 2"),
        trial(4, FAILED, message="OOMKilled | exit 137\nsee the pod log", seconds=None),
        trial(5, METRICS_UNAVAILABLE, message="the trainer never printed val_auc"),
        trial(6, SUCCEEDED, 0.7900, history=[0.70, 0.75, 0.78, 0.79]),
        trial(7, SUCCEEDED, 0.6000, history=[0.55, 0.58, 0.59, 0.60]),
    ]


# ---------------------------------------------------------------------------------------------
# Markdown
# ---------------------------------------------------------------------------------------------


def split_row(line: str) -> list[str]:
    """A GFM table row's cells: split on pipes not escaped by a backslash."""
    assert line.startswith("| ") and line.endswith(" |"), line
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", line[1:-1])]


def table(markdown: str) -> tuple[list[str], list[list[str]]]:
    lines = [line for line in markdown.splitlines() if line.startswith("|")]
    header, alignment, *rows = (split_row(line) for line in lines)
    assert all(set(cell) <= set(":-") for cell in alignment)
    assert all(len(row) == len(header) for row in rows), "a row with a different number of cells"
    return header, rows


@pytest.mark.parametrize(
    ("direction", "best_name", "best_value"),
    [("maximize", "trial-2", "0.8123"), ("minimize", "trial-7", "0.6000")],
)
def test_best_row_follows_the_direction(direction, best_name, best_value):
    markdown = trials_markdown(run(direction, mixed_trials()), PARAMETERS)
    header, rows = table(markdown)
    marked = [row for row in rows if BEST_MARK in row[header.index("trial")]]
    assert len(marked) == 1
    (best,) = marked
    assert best[header.index("trial")] == f"{BEST_MARK} **{best_name}**"
    assert best[header.index("val\\_auc")] == best_value
    assert f"- **Best trial:** {BEST_MARK} **{best_name}**, val\\_auc **{best_value}**" in markdown
    assert f"{direction} val\\_auc" in markdown.splitlines()[0]


def test_table_lists_every_trial_in_order_with_values_and_parameters():
    result = run("maximize", mixed_trials(), goal_reached=True, reason="ExperimentMaxTrialsReached")
    markdown = trials_markdown(result, PARAMETERS)
    header, rows = table(markdown)
    assert [row[0] for row in rows] == [str(n) for n in range(1, 8)]
    assert [row[2] for row in rows] == [
        SUCCEEDED,
        SUCCEEDED,
        EARLY_STOPPED,
        FAILED,
        METRICS_UNAVAILABLE,
        SUCCEEDED,
        SUCCEEDED,
    ]
    columns = {name: header.index(name) for name in header}
    first = rows[0]
    assert first[columns["learning\\_rate"]] == "0.001"
    assert first[columns["batch\\_size"]] == "512"
    assert first[columns["val\\_logloss"]] == "0.5100"
    assert first[columns["seconds"]] == "12.3"
    failed = rows[3]
    assert failed[columns["val\\_auc"]] == "—"
    assert failed[columns["val\\_logloss"]] == "—"
    assert failed[columns["seconds"]] == "—"
    assert rows[2][columns["message"]] == "stopped by medianstop at epoch 2"
    assert "- **Goal reached:** yes" in markdown
    assert "- **Run ended:** ExperimentMaxTrialsReached" in markdown
    counts = "7 run: 4 succeeded, 1 early-stopped, 2 failed (1 never reported val\\_auc)"
    assert f"- **Trials:** {counts}" in markdown
    assert "(learning\\_rate=0.002, batch\\_size=1024)" in markdown


def test_header_names_objective_parameters_and_other_metrics():
    header, _rows = table(trials_markdown(run("maximize", mixed_trials()), PARAMETERS))
    assert header == [
        "#",
        "trial",
        "status",
        "learning\\_rate",
        "batch\\_size",
        "val\\_auc",
        "val\\_logloss",
        "seconds",
        "message",
    ]


def test_pipes_newlines_and_markup_in_a_message_stay_in_their_cell():
    tricky = trial(1, FAILED, message="a | b\\|c\r\nline two <b>bold</b> *x*")
    markdown = trials_markdown(run("maximize", [tricky, trial(2, SUCCEEDED, 0.7)]), PARAMETERS)
    header, rows = table(markdown)
    message = rows[0][header.index("message")]
    assert message == r"a \| b\\\|c<br>line two \<b\>bold\</b\> \*x\*"
    # Every row is a single line: the newline did not end the table.
    assert len(rows) == 2


def test_no_message_column_when_no_trial_has_one():
    header, _rows = table(trials_markdown(run("minimize", [trial(1, SUCCEEDED, 0.3)]), PARAMETERS))
    assert "message" not in header


def test_no_trial_observed_and_no_trial_at_all():
    failed_only = trials_markdown(run("maximize", [trial(1, FAILED, message="boom")]), PARAMETERS)
    assert "- **Best trial:** none (no trial reported val\\_auc)" in failed_only
    assert "- **Goal reached:** no" in failed_only
    _header, rows = table(failed_only)
    assert BEST_MARK not in "".join(rows[0])
    empty = trials_markdown(run("maximize", []), PARAMETERS)
    assert "No trial ran." in empty and "|" not in empty


def test_parameter_columns_default_to_the_trials_order():
    header, _rows = table(trials_markdown(run("maximize", [trial(1, SUCCEEDED, 0.7)]), ()))
    assert header[3:5] == ["learning\\_rate", "batch\\_size"]


# ---------------------------------------------------------------------------------------------
# HTML
# ---------------------------------------------------------------------------------------------


class _Checker(HTMLParser):
    """Fails on an unbalanced tag, the way a browser would silently repair it."""

    VOID: ClassVar[set[str]] = {"meta", "br", "img", "link", "input", "hr"}

    def __init__(self) -> None:
        super().__init__()
        self.open: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag not in self.VOID:
            self.open.append(tag)

    def handle_startendtag(self, tag, attrs):
        pass

    def handle_endtag(self, tag):
        assert self.open and self.open[-1] == tag, f"</{tag}> closes {self.open[-1:]}"
        self.open.pop()


def parse(page: str) -> ET.Element:
    """The page as XML (it is written to be well-formed) after an HTML parser found it balanced."""
    checker = _Checker()
    checker.feed(page)
    checker.close()
    assert checker.open == []
    return ET.fromstring(page)


def by_class(root: ET.Element, tag: str, css: str) -> list[ET.Element]:
    return [e for e in root.iter(tag) if css in e.get("class", "").split()]


def svg(root: ET.Element, css: str) -> ET.Element:
    (element,) = by_class(root, "svg", css)
    return element


def points(polyline: ET.Element) -> list[tuple[float, float]]:
    return [tuple(map(float, p.split(","))) for p in polyline.get("points", "").split()]


def tooltip(element: ET.Element) -> str:
    return element.findtext("title") or ""


def assert_self_contained(page: str) -> None:
    lowered = page.lower()
    for forbidden in (
        "http://",
        "https://",
        "<script",
        "<link",
        "<img",
        "<iframe",
        "@import",
        "url(",
        "href=",
    ):
        assert forbidden not in lowered, forbidden
    assert not re.search(r"\son\w+=", lowered), "an event handler attribute"


@pytest.mark.parametrize("direction", ["maximize", "minimize"])
def test_best_so_far_line_is_monotone_in_the_direction(direction):
    result = run(direction, mixed_trials())
    root = parse(optimisation_plot_html(result))
    objective = svg(root, "objective")
    (line,) = by_class(objective, "polyline", "best-so-far")
    corners = points(line)
    ys = [y for _x, y in corners]
    xs = [x for x, _y in corners]
    assert xs == sorted(xs)
    # SVG's y grows downwards: a rising best (maximize) has falling y.
    if direction == "maximize":
        assert ys == sorted(ys, reverse=True)
    else:
        assert ys == sorted(ys)
    assert ys[0] != ys[-1]
    # The line ends level with the best trial's point, at the last trial's x.
    points_by_trial = {
        tooltip(p).split()[1]: (float(p.get("cx", "nan")), float(p.get("cy", "nan")))
        for p in by_class(objective, "circle", "point")
    }
    best_name = result.best.name if result.best else ""
    assert corners[-1][1] == pytest.approx(points_by_trial[best_name][1])
    last_x = max(x for x, _y in points_by_trial.values())
    assert corners[-1][0] == pytest.approx(last_x)


@pytest.mark.parametrize(
    ("values", "maximize", "expected"),
    [
        ([None, 0.5, 0.4, 0.7, None], True, [(2, 0.5), (4, 0.5), (4, 0.7), (5, 0.7)]),
        ([0.5, 0.4, 0.7], False, [(1, 0.5), (2, 0.5), (2, 0.4), (3, 0.4)]),
        ([0.5], True, [(1, 0.5)]),
        ([0.5, 0.5, 0.5], True, [(1, 0.5), (3, 0.5)]),
        ([None, None], True, []),
    ],
)
def test_best_so_far_corners(values, maximize, expected):
    assert best_so_far(values, maximize) == expected


def test_outcomes_are_drawn_apart():
    result = run("maximize", mixed_trials())
    root = parse(optimisation_plot_html(result))
    objective = svg(root, "objective")
    succeeded = by_class(objective, "circle", "succeeded")
    early = by_class(objective, "polygon", "early-stopped")
    failed = by_class(objective, "path", "failed")
    assert sorted(tooltip(e).split()[1] for e in succeeded) == ["trial-1", "trial-2", "trial-6", "trial-7"]
    assert [tooltip(e).split()[1] for e in early] == ["trial-3"]
    # Failed and metrics-unavailable trials: crosses on the x axis (no value to place).
    assert [tooltip(e).split()[1] for e in failed] == ["trial-4", "trial-5"]
    (frame,) = by_class(objective, "rect", "plot-area")
    axis_y = float(frame.get("y", "nan")) + float(frame.get("height", "nan"))
    for cross in failed:
        ys = [float(n) for n in re.findall(r"-?\d+\.?\d*", cross.get("d", ""))[1::2]]
        assert min(ys) < axis_y < max(ys)
    assert "OOMKilled | exit 137" in tooltip(failed[0])
    # Different colours, and the early-stopped marker is hollow.
    assert succeeded[0].get("fill") != early[0].get("stroke") != failed[0].get("stroke")
    assert early[0].get("fill") == "white"
    legend = " ".join(t.text or "" for g in by_class(objective, "g", "legend") for t in g.iter("text"))
    for label in ("succeeded", "early-stopped", "failed (no value)", "best so far (max)", "best trial"):
        assert label in legend
    (ring,) = by_class(objective, "circle", "best")
    assert "trial-2" in tooltip(ring)


def test_points_sit_in_value_order_inside_the_frame():
    result = run("maximize", mixed_trials())
    objective = svg(parse(optimisation_plot_html(result)), "objective")
    (frame,) = by_class(objective, "rect", "plot-area")
    top = float(frame.get("y", "nan"))
    bottom = top + float(frame.get("height", "nan"))
    drawn = {tooltip(p).split()[1]: float(p.get("cy", "nan")) for p in by_class(objective, "circle", "point")}
    assert all(top < y < bottom for y in drawn.values())
    # Higher objective, higher on the page (smaller y): trial-2 (0.8123) > trial-6 (0.79) > trial-1 (0.71).
    assert drawn["trial-2"] < drawn["trial-6"] < drawn["trial-1"] < drawn["trial-7"]
    ticks = [t.text for t in objective.iter("text") if t.get("class") == "x-tick"]
    assert ticks == [str(n) for n in range(1, 8)]
    y_ticks = [float(t.text or "nan") for t in objective.iter("text") if t.get("class") == "y-tick"]
    assert y_ticks == sorted(y_ticks) and len(y_ticks) >= 3
    assert y_ticks[0] <= 0.6 and y_ticks[-1] >= 0.8123


def test_history_panel_has_one_curve_per_trial_and_early_stopped_is_shorter():
    root = parse(optimisation_plot_html(run("maximize", mixed_trials())))
    history = svg(root, "history")
    curves = {tooltip(c).split()[1]: c for c in by_class(history, "polyline", "epoch-curve")}
    assert sorted(curves) == ["trial-1", "trial-2", "trial-3", "trial-6", "trial-7"]
    assert len(points(curves["trial-3"])) == 2 and len(points(curves["trial-2"])) == 4
    assert "early-stopped" in curves["trial-3"].get("class", "").split()
    assert curves["trial-3"].get("stroke") != curves["trial-2"].get("stroke")
    shortest_end = max(x for x, _y in points(curves["trial-3"]))
    assert shortest_end < max(x for x, _y in points(curves["trial-2"]))


def test_no_history_panel_without_histories():
    trials = [trial(1, SUCCEEDED, 0.7), trial(2, SUCCEEDED, 0.8)]
    root = parse(optimisation_plot_html(run("maximize", trials)))
    assert by_class(root, "svg", "history") == []
    assert len(by_class(root, "svg", "objective")) == 1


def test_page_loads_nothing_and_escapes_text():
    trials = [
        trial(1, SUCCEEDED, 0.7, message="<script>alert(1)</script>"),
        trial(2, FAILED, message="see https://example.com/log & <img src=x>"),
    ]
    result = run("maximize", trials, algorithm="tpe<b>", reason="Max <reason>")
    page = optimisation_plot_html(result)
    root = parse(page)
    # The run's texts arrive as text: no element or attribute of theirs, nothing that loads.
    tags = {element.tag for element in root.iter()}
    drawn = {"svg", "text", "rect", "line", "g", "circle", "polygon", "path", "polyline"}
    assert tags <= {"html", "head", "meta", "title", "body", "h1", "p", *drawn}
    assert not [v for e in root.iter() for v in e.attrib.values() if "://" in v or "url(" in v]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script" not in page
    assert "see https://example.com/log &amp; &lt;img src=x&gt;" in page
    assert root.findtext("head/title") == "Hyperparameter tuning: tpe<b>, maximize val_auc"
    assert "Run ended: Max <reason>." in (root.findtext("body/p") or "")


@pytest.mark.parametrize("direction", ["maximize", "minimize"])
def test_page_has_no_url_at_all(direction):
    assert_self_contained(optimisation_plot_html(run(direction, mixed_trials())))


@pytest.mark.parametrize(
    "trials",
    [[], [trial(1, FAILED, message="boom"), trial(2, METRICS_UNAVAILABLE), trial(3, KILLED)]],
    ids=["no trials", "none observed"],
)
def test_no_observed_trial_says_so(trials):
    page = optimisation_plot_html(run("maximize", trials))
    root = parse(page)
    (note,) = by_class(root, "p", "no-data")
    assert note.text == "No trial reported the objective val_auc: nothing to plot."
    assert by_class(root, "svg", "objective") == []
    assert_self_contained(page)


def test_one_trial_and_equal_values_draw_without_dividing_by_zero():
    one = svg(
        parse(optimisation_plot_html(run("maximize", [trial(1, SUCCEEDED, 0.75, history=[0.75])]))),
        "objective",
    )
    (point,) = by_class(one, "circle", "point")
    (frame,) = by_class(one, "rect", "plot-area")
    top, height = float(frame.get("y", "nan")), float(frame.get("height", "nan"))
    assert top < float(point.get("cy", "nan")) < top + height
    equal = [trial(n, SUCCEEDED, 0.5, history=[0.5, 0.5]) for n in (1, 2, 3)]
    root = parse(optimisation_plot_html(run("minimize", equal)))
    objective = svg(root, "objective")
    ys = {float(p.get("cy", "nan")) for p in by_class(objective, "circle", "point")}
    assert len(ys) == 1 and all(y == y for y in ys)  # one level, not NaN
    (line,) = by_class(objective, "polyline", "best-so-far")
    assert len({y for _x, y in points(line)}) == 1
    zero = [trial(1, SUCCEEDED, 0.0), trial(2, SUCCEEDED, 0.0)]
    parse(optimisation_plot_html(run("maximize", zero)))


def test_unobserved_values_are_not_plotted():
    """A succeeded trial without a value, a NaN objective and a killed one go on the axis."""
    trials = [
        trial(1, SUCCEEDED, 0.7),
        trial(2, SUCCEEDED, None),
        trial(3, SUCCEEDED, float("nan")),
        trial(4, KILLED),
        trial(5, EARLY_STOPPED, 0.6, history=[0.6, float("nan")]),
    ]
    objective = svg(parse(optimisation_plot_html(run("maximize", trials))), "objective")
    assert [tooltip(p).split()[1] for p in by_class(objective, "circle", "point")] == ["trial-1"]
    no_value = [tooltip(m).split()[1] for m in by_class(objective, "line", "no-value")]
    assert no_value == ["trial-2", "trial-3", "trial-4"]
    markdown = trials_markdown(run("maximize", trials), PARAMETERS)
    assert "1 Killed" in markdown
