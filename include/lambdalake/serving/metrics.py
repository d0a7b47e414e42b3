"""The platform's state as Prometheus metrics: the query API's ``/metrics``.

The query API already holds what the batch layer's state comes down to — per view the
high-water mark, the intervals published beyond it, the late rows waiting for a published
window, the newest real-time write — and reads the quality history the gates append to.
A scrape turns those into metrics as it happens (a ``Collector``), from the same snapshots
and looks ``/freshness`` answers from, so every API process answers the same and no
batch task has to outlive its run to be scraped. Timestamps are exported as such
(``..._timestamp_seconds``), with the age beside where an alert wants it. The batch runs'
and steps' durations are Airflow's own metrics (StatsD: ``metrics.airflow_statsd_host``).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    SummaryMetricFamily,
)
from prometheus_client.registry import Collector

from lambdalake.batch.late_arrivals import Waiting
from lambdalake.serving.snapshot import ViewSnapshot

ViewsNow = Callable[[], dict[str, ViewSnapshot]]
WaitingNow = Callable[[], dict[str, Waiting]]
GatesNow = Callable[[], list[dict[str, Any]]]


class PlatformCollector(Collector):
    """Per view and per gate, what the platform knows at scrape time."""

    def __init__(self, snapshots: ViewsNow, waiting: WaitingNow, gates: GatesNow) -> None:
        self.snapshots = snapshots
        self.waiting = waiting
        self.gates = gates

    def collect(self) -> Iterator[Metric]:
        yield from view_metrics(self.snapshots(), self.waiting(), time.time())
        yield from gate_metrics(self.gates())


def view_metrics(snapshots: dict[str, ViewSnapshot], waiting: dict[str, Waiting],
                 now: float) -> Iterator[Metric]:
    """Each view's serving boundary, what waits for restatement and its real-time age."""
    labels = ["view"]
    mark = GaugeMetricFamily("lambdalake_batch_high_water_mark_timestamp_seconds",
                             "Start of the view's first window batch has not published",
                             labels=labels)
    mark_age = GaugeMetricFamily("lambdalake_batch_high_water_mark_age_seconds",
                                 "How far the view's high-water mark is behind now",
                                 labels=labels)
    beyond = GaugeMetricFamily("lambdalake_batch_published_beyond_mark_seconds",
                               "Published time past a gap after the mark (batch answers it)",
                               labels=labels)
    late = GaugeMetricFamily("lambdalake_batch_late_rows_waiting",
                             "Bronze rows that arrived after their window was published and "
                             "wait for its restatement", labels=labels)
    newest = GaugeMetricFamily("lambdalake_realtime_newest_update_timestamp_seconds",
                               "The view's newest real-time write", labels=labels)
    version = GaugeMetricFamily("lambdalake_batch_view_version",
                                "The batch view version serving reads", labels=labels)
    for name, snapshot in sorted(snapshots.items()):
        at = _seconds(snapshot.high_water_mark)
        mark.add_metric([name], at)
        mark_age.add_metric([name], max(0.0, now - at))
        beyond.add_metric([name], sum((end - start).total_seconds()
                                      for start, end in snapshot.batch_beyond_mark))
        version.add_metric([name], float(snapshot.view_version))
        if snapshot.realtime_newest is not None:
            newest.add_metric([name], _seconds(snapshot.realtime_newest))
        if name in waiting:
            late.add_metric([name], float(waiting[name].rows))
    yield from (mark, mark_age, beyond, late, newest, version)


def gate_metrics(results: list[dict[str, Any]]) -> Iterator[Metric]:
    """The recorded gate verdicts (oldest first): how many of each per layer, how long they
    took, and whether each subject's newest one passed."""
    runs = CounterMetricFamily("lambdalake_quality_gate_runs",
                               "Recorded quality-gate runs by layer and verdict",
                               labels=["layer", "verdict"])
    seconds = SummaryMetricFamily("lambdalake_quality_gate_duration_seconds",
                                  "Time the recorded quality gates took", labels=["layer"])
    last = GaugeMetricFamily("lambdalake_quality_gate_last_passed",
                             "1 if the newest recorded gate of the subject passed, else 0",
                             labels=["layer", "subject"])
    counts: Counter[tuple[str, str]] = Counter()
    durations: dict[str, list[float]] = {}
    newest: dict[tuple[str, str], bool] = {}
    for result in results:
        layer = result["layer"]
        counts[layer, verdict_of(result)] += 1
        durations.setdefault(layer, []).append(float(result.get("seconds") or 0.0))
        newest[layer, result["subject"]] = bool(result["success"])
    for (layer, verdict), number in sorted(counts.items()):
        runs.add_metric([layer, verdict], float(number))
    for layer, taken in sorted(durations.items()):
        seconds.add_metric([layer], count_value=len(taken), sum_value=sum(taken))
    for (layer, subject), passed in sorted(newest.items()):
        last.add_metric([layer, subject], 1.0 if passed else 0.0)
    yield from (runs, seconds, last)


def verdict_of(result: dict[str, Any]) -> str:
    """``failed``, ``warned`` (passed with warnings) or ``passed``."""
    if not result["success"]:
        return "failed"
    return "warned" if result.get("warnings") else "passed"


def _seconds(moment: datetime) -> float:
    return moment.timestamp()
