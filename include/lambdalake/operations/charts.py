"""Line charts as inline SVG: the Pipeline status page draws its history with them.

Server-side SVG needs no script and loads nothing, so the page works offline and inside
Airflow's iframe as it is; each point carries a ``<title>`` (its time and value) that a
browser shows on hover, and a chart without points says so instead of drawing axes.
"""

from __future__ import annotations

from datetime import UTC, datetime
from html import escape

Series = dict[str, list[tuple[datetime, float]]]
"""Per line name, its points (time, value), any order."""

PALETTE = ("#0969da", "#cf222e", "#1a7f37", "#9a6700", "#8250df", "#bc4c00", "#1b7c83",
           "#6e7781")
WIDTH, HEIGHT, LEFT, BOTTOM, TOP = 720, 200, 56, 24, 10


def line_chart(title: str, unit: str, series: Series) -> str:
    """``series`` as one chart headed ``title``: time along x, ``unit`` along y from 0 to
    the largest value, a legend naming each line's colour."""
    drawn = {name: sorted(points) for name, points in sorted(series.items()) if points}
    heading = f"<h3>{escape(title)}</h3>"
    if not drawn:
        return heading + "<p class=muted>Nothing recorded yet.</p>"
    times = [at.timestamp() for points in drawn.values() for at, _ in points]
    first, last = min(times), max(times)
    top = max((value for points in drawn.values() for _, value in points), default=0.0) or 1.0
    span = (last - first) or 1.0

    def x(at: datetime) -> float:
        return LEFT + (at.timestamp() - first) / span * (WIDTH - LEFT - 8)

    def y(value: float) -> float:
        return TOP + (1 - value / top) * (HEIGHT - TOP - BOTTOM)

    lines, legend = [], []
    for index, (name, points) in enumerate(drawn.items()):
        colour = PALETTE[index % len(PALETTE)]
        path = " ".join(f"{x(at):.1f},{y(value):.1f}" for at, value in points)
        dots = "".join(
            f'<circle cx="{x(at):.1f}" cy="{y(value):.1f}" r="2.5" fill="{colour}">'
            f"<title>{escape(name)} {at:%Y-%m-%d %H:%M:%S}Z: {_number(value)} "
            f"{escape(unit)}</title></circle>" for at, value in points)
        lines.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" '
                     f'points="{path}"/>{dots}')
        legend.append(f'<span class="key" style="background:{colour}"></span>'
                      f"{escape(name)} ({len(points)})")
    bottom = HEIGHT - BOTTOM
    axes = (f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{bottom}" stroke="#8c959f"/>'
            f'<line x1="{LEFT}" y1="{bottom}" x2="{WIDTH - 8}" y2="{bottom}" stroke="#8c959f"/>'
            f'<text x="{LEFT - 4}" y="{TOP + 8}" text-anchor="end">{_number(top)}</text>'
            f'<text x="{LEFT - 4}" y="{bottom}" text-anchor="end">0</text>'
            f'<text x="{LEFT}" y="{HEIGHT - 6}">{datetime.fromtimestamp(first, UTC):%m-%d %H:%M}'
            f'</text><text x="{WIDTH - 8}" y="{HEIGHT - 6}" text-anchor="end">'
            f"{datetime.fromtimestamp(last, UTC):%m-%d %H:%M}</text>")
    svg = (f'<svg class="chart" role="img" aria-label="{escape(title)}" width="{WIDTH}" '
           f'height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-size="11">'
           f"{axes}{''.join(lines)}</svg>")
    return (f"{heading}<figure>{svg}<figcaption>{escape(unit)} · "
            f"{' '.join(legend)}</figcaption></figure>")


def _number(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.2f}".rstrip("0").rstrip(".")
