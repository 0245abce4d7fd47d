"""Server-rendered SVG charts for ``crawl serve``: no script, no library, works offline.

Owns: a run's rates over its time from its progress samples (``rates``: pages/s and
errors/s between consecutive samples, at most ``MAX_POINTS`` points, averaged into buckets),
and drawing series of (x, y) as a line chart with axes and a legend (``line_chart``). Pure:
numbers in, SVG text out; every label is escaped, and styling is by CSS class (the page's
Content-Security-Policy forbids inline styles).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from html import escape

MAX_POINTS = 240
"""Steps a line is drawn with (a sample every 2 s: one point per 8 minutes of a 32-hour run)."""
MIN_BUCKET_S = 1.0
WIDTH, HEIGHT = 720, 230
_LEFT, _RIGHT, _TOP, _BOTTOM = 52, 36, 26, 30

Series = tuple[str, str, Sequence[tuple[float, float]]]
"""A line: its legend, its CSS class, its points."""


def rates(samples: Sequence[dict[str, float]]) -> tuple[list[tuple[float, float]], ...]:
    """(pages/s, errors/s) over elapsed seconds, from cumulative samples: steps, each a
    bucket's average drawn from its start to its end (two points); a bucket spans at least
    ``MIN_BUCKET_S`` (a long run keeps its shape in ``MAX_POINTS`` buckets); a last bucket shorter than half the others joins the one before, so the final
    sample, taken moments after the last periodic one, draws no spike."""
    pages: list[tuple[float, float]] = []
    errors: list[tuple[float, float]] = []
    if len(samples) < 2:
        return pages, errors
    span = samples[-1]["elapsed_s"] - samples[0]["elapsed_s"]
    width = max(MIN_BUCKET_S, span / MAX_POINTS)
    anchors = [samples[0]]
    for sample in samples[1:]:
        if sample["elapsed_s"] - anchors[-1]["elapsed_s"] >= width:
            anchors.append(sample)
    last = samples[-1]
    if last is not anchors[-1]:
        if len(anchors) > 1 and last["elapsed_s"] - anchors[-1]["elapsed_s"] < width / 2:
            anchors[-1] = last
        else:
            anchors.append(last)
    for a, b in itertools.pairwise(anchors):
        dt = b["elapsed_s"] - a["elapsed_s"]
        if dt <= 0:
            continue
        page_rate = max(0.0, (b["done"] - a["done"]) / dt)
        error_rate = max(0.0, (b["failed"] - a["failed"]) / dt)
        pages += [(a["elapsed_s"], page_rate), (b["elapsed_s"], page_rate)]
        errors += [(a["elapsed_s"], error_rate), (b["elapsed_s"], error_rate)]
    return pages, errors


def _nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 times a power of ten that is at least ``value``."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    for factor in (1, 2, 2.5, 5, 10):
        if factor * power >= value:
            return factor * power
    return 10 * power


def _label(value: float) -> str:
    if value >= 1000:
        return f"{value / 1000:g}k"
    return f"{value:g}"


def _duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 60:
        return f"{seconds / 60:.1f} min"
    return f"{seconds:.0f} s"


def line_chart(title: str, series: Sequence[Series], unit: str) -> str:
    """An SVG line chart of ``series`` (x in seconds), ``title`` as its accessible name."""
    xs = [x for _, _, points in series for x, _ in points]
    ys = [y for _, _, points in series for _, y in points]
    x_max = max(xs, default=1.0) or 1.0
    y_max = _nice_ceiling(max(ys, default=0.0))
    plot_w, plot_h = WIDTH - _LEFT - _RIGHT, HEIGHT - _TOP - _BOTTOM

    def sx(x: float) -> float:
        return _LEFT + plot_w * x / x_max

    def sy(y: float) -> float:
        return _TOP + plot_h * (1 - y / y_max)

    parts = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(title)}</title>",
    ]
    for i in range(5):
        y = y_max * i / 4
        parts.append(f'<line class="grid" x1="{_LEFT}" x2="{WIDTH - _RIGHT}" '
                     f'y1="{sy(y):.1f}" y2="{sy(y):.1f}"/>')  # fmt: skip
        parts.append(f'<text class="tick" x="{_LEFT - 6}" y="{sy(y) + 4:.1f}" '
                     f'text-anchor="end">{_label(y)}</text>')  # fmt: skip
    for i in range(5):
        x = x_max * i / 4
        parts.append(f'<text class="tick" x="{sx(x):.1f}" y="{HEIGHT - 10}" '
                     f'text-anchor="middle">{_duration(x)}</text>')  # fmt: skip
    parts.append(f'<text class="tick" x="{_LEFT}" y="{_TOP - 3}">{escape(unit)}</text>')
    for position, (legend, css, points) in enumerate(series):
        if points:
            path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in points)
            parts.append(f'<polyline class="line {escape(css)}" points="{path}"/>')
        lx = WIDTH - _RIGHT - 170 + position * 90
        parts.append(f'<rect class="key {escape(css)}" x="{lx}" y="4" width="10" height="10"/>')
        parts.append(f'<text class="tick" x="{lx + 14}" y="13">{escape(legend)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def bars(title: str, counts: Sequence[tuple[str, int]], css: str = "bar") -> str:
    """A horizontal bar chart of labelled counts (status mix, errors, skip reasons), as HTML
    (label, bar, number) whose bar widths are SVG, not inline styles."""
    if not counts:
        return '<p class="empty">none</p>'
    top = max(n for _, n in counts) or 1
    rows = []
    for label, n in counts:
        width = max(1, round(200 * n / top))
        rows.append(
            f"<tr><th scope=row>{escape(label)}</th><td class=barcell><svg class=barsvg "
            "viewBox='0 0 200 12' preserveAspectRatio='none' aria-hidden=true>"
            f"<rect class='{escape(css)}' width='{width}' height='12'/></svg></td>"
            f"<td class=num>{n:,}</td></tr>"
        )
    return f"<table class=bars aria-label='{escape(title)}'>{''.join(rows)}</table>"
