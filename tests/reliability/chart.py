"""A line chart as inline SVG: the soak's memory plot, drawn at build time, no script needed.

The docs site must read offline, so the plot is not a Mermaid block (which
needs a script from a CDN) but SVG written into the page by the soak itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape

WIDTH, HEIGHT = 720, 340
LEFT, RIGHT, TOP, BOTTOM = 64, 24, 40, 56
COLORS = ("#2563eb", "#ea580c", "#16a34a", "#9333ea")
FONT = 'font-family="Helvetica,Arial,sans-serif" font-size="14"'


def line_chart(
    title: str, x_label: str, xs: Sequence[int], y_label: str, series: Mapping[str, Sequence[float]]
) -> str:
    """One line per series over `xs`, y from 0 to a quarter above the top value; one line of SVG."""
    top = max(value for values in series.values() for value in values) * 1.25 or 1.0
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(i: int) -> float:
        return LEFT + plot_w * (xs[i] - xs[0]) / ((xs[-1] - xs[0]) or 1)

    def y(value: float) -> float:
        return TOP + plot_h * (1 - value / top)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'width="{WIDTH}" role="img" aria-label="{escape(title)}">',
        f'<text x="{WIDTH / 2}" y="22" text-anchor="middle" {FONT}>{escape(title)}</text>',
        f'<line x1="{LEFT}" y1="{TOP + plot_h}" x2="{LEFT + plot_w}" y2="{TOP + plot_h}" '
        'stroke="#6b7280"/>',
        f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{TOP + plot_h}" stroke="#6b7280"/>',
    ]
    for tick in range(5):
        value = top * tick / 4
        parts.append(
            f'<text x="{LEFT - 8}" y="{y(value) + 5:.1f}" text-anchor="end" {FONT}>'
            f"{value:.2f}</text>"
        )
    for i in (0, len(xs) // 2, len(xs) - 1):
        parts.append(
            f'<text x="{x(i):.1f}" y="{TOP + plot_h + 22}" text-anchor="middle" {FONT}>'
            f"{xs[i]:,}</text>"
        )
    parts.append(
        f'<text x="{LEFT + plot_w / 2}" y="{HEIGHT - 8}" text-anchor="middle" {FONT}>'
        f"{escape(x_label)}</text>"
    )
    parts.append(
        f'<text x="16" y="{TOP + plot_h / 2}" text-anchor="middle" {FONT} '
        f'transform="rotate(-90 16 {TOP + plot_h / 2})">{escape(y_label)}</text>'
    )
    for number, (name, values) in enumerate(series.items()):
        color = COLORS[number % len(COLORS)]
        points = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(values))
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{points}"/>')
        parts.append(
            f'<text x="{LEFT + plot_w - 4}" y="{y(values[-1]) - 8:.1f}" text-anchor="end" '
            f'fill="{color}" {FONT}>{escape(name)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)
