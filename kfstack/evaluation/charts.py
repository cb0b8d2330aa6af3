"""The ROC curve and the confusion matrix as one self-contained HTML page of inline SVG, drawn
with :mod:`kfstack.plotting` (which says why the page loads nothing). Each SVG declares its
namespace, so that it also parses as a standalone SVG document. Every function is pure: numbers
in, markup out; every text is escaped.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from kfstack import plotting
from kfstack.plotting import FONT, Axis

# ROC plot: a square plot area with room above for the title, left and below for ticks and axis labels.
ROC_WIDTH, ROC_HEIGHT = 400, 396
ROC_LEFT, ROC_TOP, ROC_SIZE = 64, 56, 290
ROC_TICKS = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
_ROC_LABELS = tuple(f"{tick:.1f}" for tick in ROC_TICKS)
# False positive rate across, true positive rate up (SVG's y grows downwards), both 0 to 1.
FPR_AXIS = Axis(0.0, 1.0, ROC_LEFT, ROC_LEFT + ROC_SIZE, ROC_TICKS, _ROC_LABELS)
TPR_AXIS = Axis(0.0, 1.0, ROC_TOP + ROC_SIZE, ROC_TOP, ROC_TICKS, _ROC_LABELS)

# Confusion matrix: n x n cells after a column for the row labels and a row for the column labels;
# a cell is CELL wide for two classes, smaller for more, never below MIN_CELL.
CELL, MIN_CELL, GRID_SIDE = 130, 34, 390
GRID_LEFT, GRID_TOP = 150, 84
# Cell shade from white (no rows) to this blue (the largest cell).
FULL_SHADE = (31, 90, 166)
DARK_SHADE_FROM = 0.55  # share of FULL_SHADE above which the count is written in white


def roc_title(auc: float | None, auc_undefined_reason: str = "") -> tuple[str, str]:
    """(headline, note): "ROC curve, AUC 0.8123" and no note, or "ROC curve, AUC undefined" and
    the reason (a line of its own: it would not fit beside the headline)."""
    if auc is not None:
        return f"ROC curve, AUC {auc:.4f}", ""
    return "ROC curve, AUC undefined", auc_undefined_reason


def roc_svg(
    fpr: Sequence[float], tpr: Sequence[float], auc: float | None, auc_undefined_reason: str = ""
) -> str:
    """The ROC curve through the points ``(fpr[i], tpr[i])``, with the chance diagonal.

    Args:
        fpr: False positive rates in [0, 1], in curve order.
        tpr: True positive rates in [0, 1], as many as ``fpr``.
        auc: Area under the curve, or ``None`` when undefined on this data.
        auc_undefined_reason: Why the AUC is undefined, shown in the title.

    Raises:
        ValueError: ``fpr`` and ``tpr`` differ in length.
    """
    if len(fpr) != len(tpr):
        raise ValueError(f"fpr has {len(fpr)} points, tpr {len(tpr)}")
    headline, note = roc_title(auc, auc_undefined_reason)
    full_title = f"{headline} ({note})" if note else headline
    x, y = FPR_AXIS, TPR_AXIS
    parts = [
        *plotting.svg_start(ROC_WIDTH, ROC_HEIGHT, "roc", full_title, namespace=True),
        plotting.headline(ROC_LEFT + ROC_SIZE / 2, 22, headline),
    ]
    if note:
        parts.append(
            f"<text x='{ROC_LEFT + ROC_SIZE / 2:.1f}' y='40' text-anchor='middle' font-size='12' "
            f"{FONT}>{html.escape(note)}</text>"
        )
    # The tick labels are short ("0.2"): the vertical axis title sits closer than the default.
    parts += plotting.frame(x, y, "false positive rate", "true positive rate (recall)", y_title_gap=42)
    points = " ".join(f"{x(f):.2f},{y(t):.2f}" for f, t in zip(fpr, tpr, strict=True))
    parts += [
        f"<line x1='{x.start:.1f}' y1='{y.start:.1f}' x2='{x.end:.1f}' y2='{y.end:.1f}' stroke='#999' "
        "stroke-dasharray='5 4' class='chance'/>",
        f"<polyline points='{points}' fill='none' stroke='#1f5aa6' stroke-width='2' class='curve'/>",
        "</svg>",
    ]
    return "\n".join(parts)


def shade(share: float) -> str:
    """Fill colour for a cell holding ``share`` (0-1) of the largest cell's count."""
    share = min(max(share, 0.0), 1.0)
    red, green, blue = (round(255 + (full - 255) * share) for full in FULL_SHADE)
    return f"rgb({red},{green},{blue})"


def cell_size(classes: int) -> int:
    """A confusion cell's side for ``classes`` classes: the grid stays about GRID_SIDE wide."""
    return max(MIN_CELL, min(CELL, GRID_SIDE // max(classes, 1)))


def confusion_svg(matrix: Sequence[Sequence[int]], labels: Sequence[str], caption: str) -> str:
    """The confusion matrix as a grid of cells shaded by count.

    Args:
        matrix: Rows the true class, columns the predicted one (``[[TN, FP], [FN, TP]]`` for a
            binary task).
        labels: The classes' names, in the matrix's order.
        caption: How a row's class was predicted (shown below), e.g. "predicted 1 at
            probability ≥ 0.5".

    Raises:
        ValueError: ``matrix`` is not square with a label per class.
    """
    n = len(labels)
    if n == 0 or len(matrix) != n or any(len(row) != n for row in matrix):
        raise ValueError(
            f"a confusion matrix is n x n with a label per class; got {len(matrix)} rows, {n} labels"
        )
    cell = cell_size(n)
    count_size, share_size = (18, 11) if cell >= 90 else (11, 0)
    width, height = GRID_LEFT + n * cell + 20, GRID_TOP + n * cell + 48
    total = sum(map(sum, matrix))
    largest = max(max(row) for row in matrix)
    middle = GRID_LEFT + n * cell / 2
    parts = [
        *plotting.svg_start(width, height, "confusion", f"Confusion matrix, {caption}", namespace=True),
        plotting.headline(middle, 22, "Confusion matrix"),
        f"<text x='{middle:.1f}' y='{GRID_TOP - 36}' text-anchor='middle' font-size='12' "
        f"font-style='italic' {FONT}>predicted</text>",
        f"<text x='{GRID_LEFT - 12}' y='{GRID_TOP - 14}' text-anchor='end' font-size='12' "
        f"font-style='italic' {FONT}>true</text>",
    ]
    for index, label in enumerate(labels):
        text = html.escape(label)
        parts += [
            f"<text x='{GRID_LEFT + (index + 0.5) * cell:.1f}' y='{GRID_TOP - 12}' text-anchor='middle' "
            f"font-size='12' {FONT}>{text}</text>",
            f"<text x='{GRID_LEFT - 12}' y='{GRID_TOP + (index + 0.5) * cell + 4:.1f}' text-anchor='end' "
            f"font-size='12' {FONT}>{text}</text>",
        ]
    for row, counts in enumerate(matrix):
        for column, count in enumerate(counts):
            share = count / largest if largest else 0.0
            x, y = GRID_LEFT + column * cell, GRID_TOP + row * cell
            ink = "white" if share > DARK_SHADE_FROM else "#222"
            parts += [
                f"<rect x='{x}' y='{y}' width='{cell}' height='{cell}' fill='{shade(share)}' "
                f"stroke='#444' class='cell'/>",
                f"<text x='{x + cell / 2:.1f}' y='{y + cell / 2 + (0 if share_size else 4):.1f}' "
                f"text-anchor='middle' font-size='{count_size}' font-weight='bold' fill='{ink}' {FONT} "
                f"class='count'>{count:,}</text>",
            ]
            if share_size:  # room for the cell's share of all rows below its count
                of_all = f"{count / total:.1%} of all" if total else "no rows"
                parts.append(
                    f"<text x='{x + cell / 2:.1f}' y='{y + cell / 2 + 20:.1f}' text-anchor='middle' "
                    f"font-size='{share_size}' fill='{ink}' {FONT}>{html.escape(of_all)}</text>"
                )
    parts += [
        f"<text x='{middle:.1f}' y='{GRID_TOP + n * cell + 28}' text-anchor='middle' "
        f"font-size='12' {FONT}>{html.escape(caption)}</text>",
        "</svg>",
    ]
    return "\n".join(parts)


def charts_html(
    *,
    heading: str,
    matrix: Sequence[Sequence[int]] = (),
    labels: Sequence[str] = (),
    caption: str = "",
    roc: tuple[Sequence[float], Sequence[float]] | None = None,
    auc: float | None = None,
    auc_undefined_reason: str = "",
) -> str:
    """One HTML page with the ROC curve and the confusion matrix side by side (what the task has
    of them: a regression has neither, and the page says so).

    Args:
        heading: The page's title.
        matrix: The confusion matrix (rows the true class); empty: none.
        labels: The classes' names, in the matrix's order.
        caption: How the matrix's predictions were made (see :func:`confusion_svg`).
        roc: Binary with probabilities: the ROC curve's (fpr, tpr)
            (``kfstack.training.metrics.roc_curve``); None: no curve.
        auc: Area under the ROC curve, or ``None`` when undefined on this data.
        auc_undefined_reason: Why the AUC is undefined, when it is.
    """
    charts = []
    if roc is not None:
        charts.append(roc_svg(roc[0], roc[1], auc, auc_undefined_reason))
    if matrix:
        charts.append(confusion_svg(matrix, labels, caption))
    if not charts:
        charts.append("<p>No chart: the task has no ROC curve or confusion matrix (see the metrics).</p>")
    return plotting.html_page(
        heading,
        [
            "<div style='display: flex; flex-wrap: wrap; gap: 24px; align-items: flex-start;'>",
            *charts,
            "</div>",
        ],
    )
