"""PNG charts of a benchmark run, drawn from its results (no display needed).

A result joins a chart through its ``Plot`` tag: one line per series, the measured value
solid and its same-run bare baseline dashed in the same colour, so a reader sees the
platform's figure next to what the bare tool does on the same machine at the same moment.
Results whose details hold a ``distribution`` (freshness) also draw it as percentile curves.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from bench.harness.common import Result

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


@dataclass(frozen=True)
class Chart:
    title: str
    x_label: str
    y_label: str
    log_x: bool = False
    log_y: bool = False
    goal: float | None = None  # drawn as a dotted line


CHARTS = {
    "freshness": Chart("Freshness vs offered rate, p99 (dashed: bare consumer)",
                       "offered rate (events/s)", "produce -> readable (s)", log_x=True,
                       log_y=True, goal=3.0),
    "throughput": Chart("Records consumed per second vs offered rate (dashed: offered)",
                        "offered rate (events/s)", "records/s", log_x=True, log_y=True),
    "batch": Chart("Batch recompute throughput vs data size (dashed: bare Spark)",
                   "bronze events", "events/s", log_x=True),
    "serving": Chart("Query latency vs concurrency, p99 (dashed: GET /health)",
                     "concurrent clients", "ms", log_x=True, log_y=True, goal=50.0),
}
DISTRIBUTION_FILE = "freshness_distribution.png"


def write_plots(results: list[Result], out: Path) -> list[Path]:
    """One PNG per chart that has results, plus the freshness distributions; their paths."""
    import matplotlib

    matplotlib.use("Agg")
    written = []
    by_chart: dict[str, list[Result]] = defaultdict(list)
    for result in results:
        if result.plot:
            by_chart[result.plot.chart].append(result)
    for name, members in by_chart.items():
        written.append(_line_chart(CHARTS[name], members, out / f"{name}.png"))
    distributions = [r for r in results if "distribution" in r.details]
    if distributions:
        written.append(_distribution_chart(distributions, out / DISTRIBUTION_FILE))
    return written


def _line_chart(chart: Chart, results: list[Result], path: Path) -> Path:
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(8, 5))
    series: dict[str, list[tuple[float, Result]]] = defaultdict(list)
    for result in results:
        assert result.plot is not None
        series[result.plot.series].append((result.plot.x, result))
    for label, points in sorted(series.items()):
        points.sort(key=lambda point: point[0])
        xs, members = [x for x, _ in points], [r for _, r in points]
        (line,) = axes.plot(xs, [r.value for r in members], marker="o", label=label)
        if all(r.baseline for r in members):
            axes.plot(xs, [r.baseline for r in members], linestyle="--", marker=".",
                      color=line.get_color())
    _decorate(axes, chart)
    return _save(figure, path)


def _distribution_chart(results: list[Result], path: Path) -> Path:
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(8, 5))
    for result in results:
        percentiles, seconds = zip(*result.details["distribution"], strict=True)
        label = result.plot.series if result.plot else result.name
        rate = f" at {result.plot.x:,.0f}/s" if result.plot else ""
        axes.plot(seconds, percentiles, label=f"{label}{rate}")
    _decorate(axes, Chart("Freshness distribution", "produce -> readable (s)", "percentile",
                          log_x=True))
    return _save(figure, path)


def _decorate(axes: Axes, chart: Chart) -> None:
    axes.set_title(chart.title)
    axes.set_xlabel(chart.x_label)
    axes.set_ylabel(chart.y_label)
    if chart.log_x:
        axes.set_xscale("log")
    if chart.log_y:
        axes.set_yscale("log")
    if chart.goal is not None:
        axes.axhline(chart.goal, color="red", linestyle=":", label=f"goal {chart.goal:g}")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize="small")


def _save(figure: Figure, path: Path) -> Path:
    import matplotlib.pyplot as plt

    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path
