"""A small hand-written SVG line chart (no plotting dependency)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b")


@dataclass(frozen=True)
class Series:
    label: str
    points: Sequence[tuple[float, float]]
    step: bool = False
    dashed: bool = False


def _nice_step(span: float, ticks: int = 6) -> float:
    if span <= 0:
        return 1.0
    raw = span / ticks
    magnitude = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 2.5, 5, 10):
        if raw <= factor * magnitude:
            return factor * magnitude
    return 10 * magnitude


def _fmt(value: float) -> str:
    return f"{value:g}" if abs(value) < 10000 else f"{value:.0f}"


def line_chart(
    series: Sequence[Series],
    *,
    title: str,
    x_label: str,
    y_label: str,
    vlines: Sequence[tuple[float, str]] = (),
    width: int = 760,
    height: int = 380,
) -> str:
    left, right, top, bottom = 70, 20, 40, 55
    plot_w, plot_h = width - left - right, height - top - bottom
    xs = [x for s in series for x, _ in s.points] + [x for x, _ in vlines] + [0.0]
    ys = [y for s in series for _, y in s.points] + [0.0]
    x_step = _nice_step(max(xs) - min(xs))
    y_step = _nice_step(max(ys) - min(ys))
    x_min, x_max = math.floor(min(xs) / x_step) * x_step, math.ceil(max(xs) / x_step) * x_step
    y_min, y_max = math.floor(min(ys) / y_step) * y_step, math.ceil(max(ys) / y_step) * y_step
    x_max = x_max if x_max > x_min else x_min + 1
    y_max = y_max if y_max > y_min else y_min + 1

    def px(x: float) -> float:
        return left + (x - x_min) / (x_max - x_min) * plot_w

    def py(y: float) -> float:
        return top + plot_h - (y - y_min) / (y_max - y_min) * plot_h

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{width / 2}" y="22" text-anchor="middle" font-size="14" '
        f'font-weight="bold">{escape(title)}</text>',
    ]
    tick = x_min
    while tick <= x_max + 1e-9:
        x = px(tick)
        out.append(
            f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + plot_h}" stroke="#eee"/>'
        )
        out.append(
            f'<text x="{x:.1f}" y="{top + plot_h + 16}" text-anchor="middle">{_fmt(tick)}</text>'
        )
        tick += x_step
    tick = y_min
    while tick <= y_max + 1e-9:
        y = py(tick)
        out.append(
            f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" stroke="#eee"/>'
        )
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{_fmt(tick)}</text>')
        tick += y_step
    out.append(
        f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#333"/>'
    )
    out.append(
        f'<text x="{left + plot_w / 2}" y="{height - 12}" text-anchor="middle">'
        f"{escape(x_label)}</text>"
    )
    out.append(
        f'<text x="16" y="{top + plot_h / 2}" text-anchor="middle" '
        f'transform="rotate(-90 16 {top + plot_h / 2})">{escape(y_label)}</text>'
    )
    for index, (x_value, label) in enumerate(vlines):
        x = px(x_value)
        out.append(
            f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + plot_h}" stroke="#999" '
            f'stroke-dasharray="6 4"/>'
        )
        label_y = top + 14 + 14 * index
        out.append(f'<text x="{x + 3:.1f}" y="{label_y:.1f}" fill="#555">{escape(label)}</text>')
    # The legend, bottom right on a white box.
    legend_w = 12 + 30 + 7 * max((len(s.label) for s in series), default=0)
    legend_x = left + plot_w - legend_w - 8
    legend_top = top + plot_h - 12 - 18 * len(series)
    out.append(
        f'<rect x="{legend_x - 4}" y="{legend_top - 4}" width="{legend_w}" '
        f'height="{18 * len(series) + 8}" fill="white" stroke="#ccc"/>'
    )
    for index, item in enumerate(series):
        color = COLORS[index % len(COLORS)]
        points: list[tuple[float, float]] = []
        for x, y in item.points:
            if item.step and points:
                points.append((x, points[-1][1]))
            points.append((x, y))
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in points)
        dash = ' stroke-dasharray="4 3"' if item.dashed else ""
        out.append(
            f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"{dash}/>'
        )
        ly = legend_top + 12 + 18 * index
        out.append(
            f'<line x1="{legend_x}" y1="{ly - 4}" x2="{legend_x + 24}" y2="{ly - 4}" '
            f'stroke="{color}" stroke-width="2"{dash}/>'
        )
        out.append(f'<text x="{legend_x + 30}" y="{ly}">{escape(item.label)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
