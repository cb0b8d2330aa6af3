"""Charts as inline SVG in one self-contained HTML page, drawn in Python without a browser or a
plotting library: the page, axes with round ticks, the plot frame, markers and a legend.

The evaluation charts (:mod:`kfstack.evaluation.charts`) and the tuning report's optimisation
plot (:mod:`kfstack.tuning.report`) are drawn with these. Both are read in the KFP UI, which
shows an ``HTML`` artifact in a sandboxed frame, and a cluster may have no way out to the
internet, so a page loads nothing -- no script, stylesheet, font or image -- and draws with SVG
elements only. A page is also well-formed XML (void elements closed), so a test or a tool can
parse it with :mod:`xml.etree`.

Every function is pure: numbers and texts in, markup out; every text is escaped here.
"""

from __future__ import annotations

import dataclasses
import html
import math
from collections.abc import Sequence

FONT = "font-family='sans-serif'"
# Declared on an SVG that should also parse as a standalone SVG document. An HTML parser puts an
# inline <svg> in this namespace by itself, so a page that must name no URL at all leaves it out.
SVG_NAMESPACE = "http://www.w3.org/2000/svg"


def html_page(heading: str, body: Sequence[str]) -> str:
    """One HTML page: ``heading`` as its title and first header, then the ``body`` markup."""
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
            *body,
            "</body>",
            "</html>",
            "",
        ]
    )


def svg_start(
    width: float, height: float, css_class: str, title: str, *, namespace: bool = False, style: str = ""
) -> list[str]:
    """The opening ``<svg>`` tag and its ``<title>`` (what a screen reader and a tooltip say).

    Args:
        namespace: Declare :data:`SVG_NAMESPACE` (see there).
        style: An inline style for the element, if any.
    """
    declared = f"xmlns='{SVG_NAMESPACE}' " if namespace else ""
    styled = f" style='{style}'" if style else ""
    return [
        f"<svg {declared}width='{width}' height='{height}' viewBox='0 0 {width} {height}' role='img' "
        f"class='{css_class}'{styled}>",
        f"<title>{html.escape(title)}</title>",
    ]


def headline(x: float, y: float, text: str, size: int = 14) -> str:
    """A chart's bold headline, centred on ``x``."""
    return (
        f"<text x='{x:.1f}' y='{y}' text-anchor='middle' font-size='{size}' font-weight='bold' "
        f"{FONT}>{html.escape(text)}</text>"
    )


# --- axes ------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Axis:
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


def value_axis(values: Sequence[float], start: float, end: float) -> Axis:
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
    return Axis(low, high, start, end, tuple(ticks), labels)


def count_axis(count: int, start: float, end: float) -> Axis:
    """An axis of the whole numbers 1..count (trials, epochs), half a unit of room each side."""
    # About ten ticks, on whole steps of 1, 2, 5, 10, ... (round(2.5) is 2).
    step = max(1, round(_nice_step(count / 10)))
    ticks = [1, *range(step, count + 1, step)] if step > 1 else list(range(1, count + 1))
    return Axis(0.5, count + 0.5, start, end, tuple(float(t) for t in ticks), tuple(map(str, ticks)))


def frame(x: Axis, y: Axis, x_title: str, y_title: str, y_title_gap: float = 60) -> list[str]:
    """The plot area: frame, grid lines, tick marks and labels, and the two axis titles.

    Args:
        y_title_gap: Pixels from the frame's left edge to the vertical axis title: room for the
            widest tick label.
    """
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
    y_title_x, y_title_y = left - y_title_gap, (top + bottom) / 2
    parts += [
        f"<text x='{(left + right) / 2:.1f}' y='{bottom + 40:.1f}' text-anchor='middle' font-size='12' "
        f"{FONT}>{html.escape(x_title)}</text>",
        f"<text x='{y_title_x:.1f}' y='{y_title_y:.1f}' text-anchor='middle' font-size='12' "
        f"transform='rotate(-90 {y_title_x:.1f} {y_title_y:.1f})' {FONT}>{html.escape(y_title)}</text>",
    ]
    return parts


# --- markers and legend ------------------------------------------------------------------------
# Each marker carries a <title>: the browser shows it as a tooltip, and it names what is marked.


def circle(x: float, y: float, colour: str, css_class: str, tip: str, radius: float = 5.0) -> str:
    return (
        f"<circle cx='{x:.2f}' cy='{y:.2f}' r='{radius:g}' fill='{colour}' stroke='{colour}' "
        f"class='{css_class}'><title>{html.escape(tip)}</title></circle>"
    )


def diamond(x: float, y: float, colour: str, css_class: str, tip: str, size: float = 6.0) -> str:
    # Hollow, so that it reads apart from a filled circle even without colour.
    points = f"{x:.2f},{y - size:.2f} {x + size:.2f},{y:.2f} {x:.2f},{y + size:.2f} {x - size:.2f},{y:.2f}"
    return (
        f"<polygon points='{points}' fill='white' stroke='{colour}' stroke-width='2' "
        f"class='{css_class}'><title>{html.escape(tip)}</title></polygon>"
    )


def cross(x: float, y: float, colour: str, css_class: str, tip: str, size: float = 5.0) -> str:
    path = (
        f"M {x - size:.2f} {y - size:.2f} L {x + size:.2f} {y + size:.2f} "
        f"M {x - size:.2f} {y + size:.2f} L {x + size:.2f} {y - size:.2f}"
    )
    return (
        f"<path d='{path}' stroke='{colour}' stroke-width='2' fill='none' "
        f"class='{css_class}'><title>{html.escape(tip)}</title></path>"
    )


def bar(x: float, y: float, colour: str, css_class: str, tip: str, size: float = 6.0) -> str:
    return (
        f"<line x1='{x:.2f}' y1='{y - size:.2f}' x2='{x:.2f}' y2='{y + size:.2f}' stroke='{colour}' "
        f"stroke-width='2' class='{css_class}'><title>{html.escape(tip)}</title></line>"
    )


def legend(entries: Sequence[tuple[str, str]], x: float, top: float) -> list[str]:
    """A column of (marker markup drawn at the origin, label) entries from ``(x, top)`` down."""
    parts = [f"<g class='legend' transform='translate({x} {top:.1f})'>"]
    for index, (marker, label) in enumerate(entries):
        y = index * 20
        parts += [
            f"<g transform='translate(8 {y})'>{marker}</g>",
            f"<text x='22' y='{y + 4}' font-size='12' {FONT}>{html.escape(label)}</text>",
        ]
    parts.append("</g>")
    return parts
