"""The ROC and confusion-matrix page: well-formed SVG, self-contained, the numbers drawn in place."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from kfstack.evaluation.charts import charts_html, confusion_svg, roc_svg
from kfstack.plotting import SVG_NAMESPACE
from kfstack.training import metrics

SVG = f"{{{SVG_NAMESPACE}}}"
LABELS = ("on_time", "delayed")


def svg_elements(page: str) -> list[ET.Element]:
    """Every ``<svg>...</svg>`` of ``page``, parsed as XML (fails on malformed markup)."""
    blocks = re.findall(r"<svg\b.*?</svg>", page, flags=re.DOTALL)
    return [ET.fromstring(block) for block in blocks]


def texts(svg: ET.Element) -> list[str]:
    return ["".join(element.itertext()) for element in svg.iter(f"{SVG}text")]


def curve_points(svg: ET.Element) -> list[tuple[float, float]]:
    (polyline,) = [line for line in svg.iter(f"{SVG}polyline") if line.get("class") == "curve"]
    return [tuple(map(float, point.split(","))) for point in polyline.get("points", "").split()]


def plot_area(svg: ET.Element) -> tuple[float, float, float, float]:
    """(left, top, right, bottom) of the ROC plot's frame."""
    (frame,) = [rect for rect in svg.iter(f"{SVG}rect") if rect.get("class") == "plot-area"]
    left, top = float(frame.get("x", "nan")), float(frame.get("y", "nan"))
    return left, top, left + float(frame.get("width", "nan")), top + float(frame.get("height", "nan"))


@pytest.fixture(scope="module")
def curve():
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 2, 2000)
    probabilities = np.clip(labels * 0.35 + rng.random(2000) * 0.65, 0, 1)
    fpr, tpr, _thresholds = metrics.roc_curve(labels, probabilities)
    return fpr, tpr, metrics.roc_auc(labels, probabilities)


def page_for(curve, matrix=((1234, 56), (789, 10_111)), auc="from curve", threshold=0.5, **overrides) -> str:
    fpr, tpr, curve_auc = curve
    arguments = {
        "heading": "Flight delay model: test split",
        "roc": (fpr, tpr),
        "auc": curve_auc if auc == "from curve" else auc,
        "matrix": [list(row) for row in matrix],
        "labels": LABELS,
        "caption": f"predicted delayed at probability ≥ {threshold:g}",
    }
    return charts_html(**{**arguments, **overrides})


def test_page_is_two_well_formed_svgs_with_titles(curve):
    page = page_for(curve)
    assert page.startswith("<!DOCTYPE html>")
    roc, confusion = svg_elements(page)
    assert roc.get("class") == "roc" and confusion.get("class") == "confusion"
    assert f"ROC curve, AUC {curve[2]:.4f}" in texts(roc)


def test_page_loads_nothing(curve):
    page = page_for(curve)
    urls = re.findall(r"[a-z]+://[^\s'\"<>]+", page)
    assert urls and set(urls) == {SVG_NAMESPACE}
    for loader in ("<script", "<link", "<img", "<iframe", "@import", "url(", "src=", "href="):
        assert loader not in page.lower(), loader


def test_roc_polyline_has_a_point_per_curve_point_inside_the_plot_area(curve):
    fpr, tpr, _auc = curve
    roc = svg_elements(page_for(curve))[0]
    points = curve_points(roc)
    assert len(points) == len(fpr) == len(tpr)
    left, top, right, bottom = plot_area(roc)
    assert all(left <= x <= right and top <= y <= bottom for x, y in points)
    # (0, 0) is the bottom left corner, (1, 1) the top right one.
    assert points[0] == pytest.approx((left, bottom))
    assert points[-1] == pytest.approx((right, top))


def test_roc_has_the_chance_diagonal_and_labelled_ticks(curve):
    roc = svg_elements(page_for(curve))[0]
    (chance,) = [line for line in roc.iter(f"{SVG}line") if line.get("class") == "chance"]
    left, top, right, bottom = plot_area(roc)
    ends = [float(chance.get(name, "nan")) for name in ("x1", "y1", "x2", "y2")]
    assert ends == pytest.approx([left, bottom, right, top])
    labels = texts(roc)
    for tick in ("0.0", "0.2", "0.4", "0.6", "0.8", "1.0"):
        assert labels.count(tick) == 2, tick  # once on each axis
    assert any("false positive rate" in text for text in labels)
    assert any("true positive rate" in text for text in labels)


def test_undefined_auc_is_said_in_the_title(curve):
    roc = svg_elements(page_for(curve, auc=None, auc_undefined_reason="no delayed flight in the test split"))[
        0
    ]
    assert roc.findtext(f"{SVG}title") == "ROC curve, AUC undefined (no delayed flight in the test split)"
    assert {"ROC curve, AUC undefined", "no delayed flight in the test split"} <= set(texts(roc))
    assert not any(re.search(r"AUC \d", text) for text in texts(roc))


def test_confusion_cells_carry_the_counts_labels_and_threshold(curve):
    confusion = svg_elements(page_for(curve, threshold=0.35))[1]
    cells = [rect for rect in confusion.iter(f"{SVG}rect") if rect.get("class") == "cell"]
    assert len(cells) == 4
    counts = [text.text for text in confusion.iter(f"{SVG}text") if text.get("class") == "count"]
    assert counts == ["1,234", "56", "789", "10,111"]  # row by row: true on_time, true delayed
    labels = texts(confusion)
    assert labels.count("on_time") == 2 and labels.count("delayed") == 2  # a row and a column each
    assert "predicted" in labels and "true" in labels
    assert "predicted delayed at probability ≥ 0.35" in labels


def test_larger_counts_get_darker_cells(curve):
    confusion = svg_elements(page_for(curve))[1]
    fills = [rect.get("fill", "") for rect in confusion.iter(f"{SVG}rect") if rect.get("class") == "cell"]
    darkness = [-sum(map(int, re.findall(r"\d+", fill))) for fill in fills]
    # Cells 1,234 / 56 / 789 / 10,111: the order of the counts.
    assert darkness[1] < darkness[2] < darkness[0] < darkness[3]
    assert fills[3] == "rgb(31,90,166)"


def test_text_is_escaped(curve):
    page = page_for(curve, labels=("<on time>", "late & gone"), heading="A & <B>")
    assert "<on time>" not in page and "&lt;on time&gt;" in page
    _roc, confusion = svg_elements(page)
    assert texts(confusion).count("<on time>") == 2
    assert texts(confusion).count("late & gone") == 2
    assert "<title>A &amp; &lt;B&gt;</title>" in page


def test_an_empty_matrix_is_drawn_without_dividing_by_zero():
    svg = ET.fromstring(confusion_svg([[0, 0], [0, 0]], LABELS, "predicted delayed at probability ≥ 0.5"))
    assert [text.text for text in svg.iter(f"{SVG}text") if text.get("class") == "count"] == ["0"] * 4


def test_mismatched_inputs_are_refused():
    with pytest.raises(ValueError, match="points"):
        roc_svg([0.0, 1.0], [0.0], 0.5)
    with pytest.raises(ValueError, match="n x n"):
        confusion_svg([[1, 2, 3], [4, 5, 6]], LABELS, "")


def test_ten_classes_fit_a_grid_of_smaller_cells_with_every_count():
    """A multiclass matrix (the digits): ten by ten cells, each with its count, and the grid no
    wider than two classes' would be."""
    matrix = [[(row * 10 + column) % 7 for column in range(10)] for row in range(10)]
    svg = ET.fromstring(confusion_svg(matrix, [str(c) for c in range(10)], "the class the model answered"))
    cells = [rect for rect in svg.iter(f"{SVG}rect") if rect.get("class") == "cell"]
    assert len(cells) == 100
    assert {float(cell.get("width", "0")) for cell in cells} == {39.0}
    counts = [text.text for text in svg.iter(f"{SVG}text") if text.get("class") == "count"]
    assert counts == [str(n) for row in matrix for n in row]
    assert float(svg.get("width", "0")) <= 150 + 2 * 130 + 20 + 130


def test_a_page_without_curve_or_matrix_says_so():
    """A regression has neither: the page says there is no chart rather than drawing an empty one."""
    page = charts_html(heading="Model evaluation: regression, 10 rows")
    assert svg_elements(page) == []
    assert "No chart" in page
