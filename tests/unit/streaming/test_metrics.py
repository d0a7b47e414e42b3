"""A stream driver's Prometheus metrics, scraped over HTTP from what its status document
and batch history say (no JVM: the documents are written here as the drivers write them)."""

from __future__ import annotations

import socket
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from lambdalake.streaming.metrics import StreamMetrics

INGEST_STATUS: dict[str, Any] = {
    "query": "ingest", "active": True, "batch_timestamp": "2026-11-20T10:00:01.500Z",
    "lag_per_partition": {"events:0": 12, "events:1": 0},
    "reference": {"query": "reference", "active": False, "batch_timestamp": None,
                  "lag_per_partition": {"reference.product:0": 3}},
}
SPEED_STATUS: dict[str, Any] = {
    "app": "speed", "views": {
        "page_traffic": {"query": "speed_late_600s", "active": True, "lag_per_partition": {
            "events:0": 5}, "watermark": "2026-11-20T09:50:00Z",
            "dropped_by_watermark_total": 7, "state_rows": 40},
        "funnel": {"query": "speed_late_600s", "active": True, "lag_per_partition": {
            "events:0": 5}, "watermark": None, "dropped_by_watermark_total": 0,
            "state_rows": 0},
    }}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def test_ingest_serves_lag_batches_and_quarantine_by_reason() -> None:
    metrics = StreamMetrics("ingest")
    port = free_port()
    assert metrics.serve("127.0.0.1", port)
    metrics.observe([{"query": "ingest", "input_rows": 500, "duration_ms": 1200},
                     {"query": "ingest", "input_rows": 300, "duration_ms": 400}], INGEST_STATUS)
    metrics.count_quarantined({"invalid_json": 4, "oversized": 0})
    metrics.count_quarantined({"invalid_json": 1, "missing_required": 2})
    samples = scrape(port)
    ingest = (("app", "ingest"), ("query", "ingest"))
    assert samples["lambdalake_stream_input_rows_total", ingest] == 800
    assert samples["lambdalake_stream_batch_duration_seconds_count", ingest] == 2
    assert samples["lambdalake_stream_batch_duration_seconds_sum", ingest] == 1.6
    assert samples["lambdalake_stream_batch_duration_seconds_bucket", (
        ("app", "ingest"), ("le", "0.5"), ("query", "ingest"))] == 1
    assert samples["lambdalake_stream_consumer_lag_records", (
        ("app", "ingest"), ("partition", "0"), ("query", "ingest"), ("topic", "events"))] == 12
    assert samples["lambdalake_stream_consumer_lag_records", (
        ("app", "ingest"), ("partition", "0"), ("query", "reference"),
        ("topic", "reference.product"))] == 3
    assert samples["lambdalake_stream_query_active", ingest] == 1
    assert samples["lambdalake_stream_query_active", (("app", "ingest"),
                                                      ("query", "reference"))] == 0
    assert samples["lambdalake_stream_last_batch_timestamp_seconds", ingest] == 1795168801.5
    assert {labels: value for (name, labels), value in samples.items()
            if name == "lambdalake_ingest_quarantined_rows_total"} == {
        (("reason", "invalid_json"),): 5, (("reason", "missing_required"),): 2}


def test_the_speed_layer_serves_each_views_watermark_late_drops_and_state_once_per_query(
) -> None:
    metrics = StreamMetrics("speed")
    port = free_port()
    assert metrics.serve("127.0.0.1", port)
    metrics.observe([], SPEED_STATUS)
    samples = scrape(port)
    lag = {labels: value for (name, labels), value in samples.items()
           if name == "lambdalake_stream_consumer_lag_records"}
    assert lag == {(("app", "speed"), ("partition", "0"), ("query", "speed_late_600s"),
                    ("topic", "events")): 5}  # two views, one query: once
    page = (("view", "page_traffic"),)
    assert samples["lambdalake_speed_watermark_timestamp_seconds", page] == 1795168200
    assert samples["lambdalake_speed_watermark_age_seconds", page] > 0
    assert ("lambdalake_speed_watermark_timestamp_seconds", (("view", "funnel"),)) not in samples
    assert samples["lambdalake_speed_late_rows_dropped_total", page] == 7
    assert samples["lambdalake_speed_state_rows", page] == 40


def test_a_port_taken_leaves_the_stream_running_without_metrics() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        assert StreamMetrics("ingest").serve("127.0.0.1", taken.getsockname()[1]) is False
    assert StreamMetrics("ingest").serve("127.0.0.1", None) is False
