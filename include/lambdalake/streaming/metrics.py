"""Prometheus metrics of a streaming application's driver (ingest, each speed shard).

The driver updates them where it writes its status document (``run_until_stopped``), from
the same snapshot of its queries, so a scrape and the status never disagree: consumer lag
per partition and whether each query runs (from the status), each finished micro-batch's
duration and rows (from the batch history), the speed layer's watermark, late drops and
state per view, and ingest's quarantined records by reason (counted in the micro-batch's
own write). A scrape reads memory only; the server listens on ``metrics.host`` (loopback
by default) at the app's port (``metrics.ingest_port``; ``metrics.speed_port`` plus the
shard's index).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from lambdalake.timeutil import parse_utc

log = logging.getLogger(__name__)

BATCH_SECONDS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


class StreamMetrics:
    """One application's metrics and the registry a scrape reads."""

    def __init__(self, app: str) -> None:
        self.app = app
        self.registry = CollectorRegistry()
        self.batch_seconds = Histogram(
            "lambdalake_stream_batch_duration_seconds", "Wall time of each finished micro-batch",
            ["app", "query"], buckets=BATCH_SECONDS, registry=self.registry)
        self.input_rows = Counter(
            "lambdalake_stream_input_rows", "Kafka records read by finished micro-batches",
            ["app", "query"], registry=self.registry)
        self.quarantined = Counter(
            "lambdalake_ingest_quarantined_rows", "Records ingest wrote to quarantine, by reason",
            ["reason"], registry=self.registry)
        self.status = StatusCollector(app)
        self.registry.register(self.status)

    def observe(self, batches: list[dict[str, Any]], document: dict[str, Any]) -> None:
        """Take in the batches just recorded and the status document just written."""
        for batch in batches:
            labels = self.input_rows.labels(self.app, batch["query"])
            labels.inc(batch["input_rows"] or 0)
            if batch.get("duration_ms") is not None:
                self.batch_seconds.labels(self.app, batch["query"]).observe(
                    batch["duration_ms"] / 1000)
        self.status.document = document

    def count_quarantined(self, by_reason: dict[str, int]) -> None:
        """Add one written micro-batch's quarantined records, by reason."""
        for reason, rows in by_reason.items():
            if rows:
                self.quarantined.labels(reason).inc(rows)

    def serve(self, host: str, port: int | None) -> bool:
        """Serve the metrics at ``http://host:port/metrics``; a port that cannot be bound is
        logged and leaves the stream running without them (they are not worth its data)."""
        if port is None:
            return False
        try:
            start_http_server(port, addr=host, registry=self.registry)
        except OSError as error:
            log.warning("%s: no metrics on %s:%d: %s", self.app, host, port, error)
            return False
        log.info("%s: metrics at http://%s:%d/metrics", self.app, host, port)
        return True


class StatusCollector(Collector):
    """Gauges read from the newest status document at scrape time."""

    def __init__(self, app: str) -> None:
        self.app = app
        self.document: dict[str, Any] = {}

    def collect(self) -> Iterator[Metric]:
        labels = ["app", "query"]
        active = GaugeMetricFamily("lambdalake_stream_query_active",
                                   "1 while the query runs, 0 once it stopped", labels=labels)
        lag = GaugeMetricFamily("lambdalake_stream_consumer_lag_records",
                                "Records in Kafka beyond the query's last micro-batch",
                                labels=[*labels, "topic", "partition"])
        last = GaugeMetricFamily("lambdalake_stream_last_batch_timestamp_seconds",
                                 "When the query's last micro-batch started", labels=labels)
        for query in query_statuses(self.document):
            name = query["query"]
            active.add_metric([self.app, name], 1.0 if query.get("active") else 0.0)
            for position, records in (query.get("lag_per_partition") or {}).items():
                topic, _, partition = position.rpartition(":")
                lag.add_metric([self.app, name, topic, partition], float(records))
            if query.get("batch_timestamp"):
                last.add_metric([self.app, name],
                                parse_utc(query["batch_timestamp"]).timestamp())
        yield from (active, lag, last)
        yield from view_metrics(self.document.get("views") or {}, time.time())


def query_statuses(document: dict[str, Any]) -> list[dict[str, Any]]:
    """Each query's progress in a status document, once per query: ingest's document is
    its main query's with the reference query's under ``reference``; the speed layer's
    lists one entry per view, views of one lateness sharing a query."""
    found: dict[str, dict[str, Any]] = {}
    for candidate in [document, document.get("reference") or {},
                      *(document.get("views") or {}).values()]:
        if isinstance(candidate, dict) and "lag_per_partition" in candidate:
            found.setdefault(candidate["query"], candidate)
    return list(found.values())


def view_metrics(views: dict[str, dict[str, Any]], now: float) -> Iterator[Metric]:
    """The speed layer's per-view state: watermark, rows dropped as too late, state."""
    watermark = GaugeMetricFamily("lambdalake_speed_watermark_timestamp_seconds",
                                  "Event time up to which the view's windows are closed",
                                  labels=["view"])
    watermark_age = GaugeMetricFamily("lambdalake_speed_watermark_age_seconds",
                                      "How far the view's watermark is behind now",
                                      labels=["view"])
    dropped = CounterMetricFamily("lambdalake_speed_late_rows_dropped",
                                  "Events the view dropped as later than its watermark",
                                  labels=["view"])
    state = GaugeMetricFamily("lambdalake_speed_state_rows",
                              "Rows of streaming state the view's query holds", labels=["view"])
    for name, view in sorted(views.items()):
        if view.get("watermark"):
            at = parse_utc(view["watermark"]).timestamp()
            watermark.add_metric([name], at)
            watermark_age.add_metric([name], max(0.0, now - at))
        dropped.add_metric([name], float(view.get("dropped_by_watermark_total") or 0))
        if view.get("state_rows") is not None:
            state.add_metric([name], float(view["state_rows"]))
    if views:
        yield from (watermark, watermark_age, dropped, state)
