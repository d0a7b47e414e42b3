"""The Pipeline status page: each series from the records it is drawn from (worked out by
hand here), the per-view table from ``/freshness`` and the verdicts, charts that load
nothing, and a login on every route."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi import Header, HTTPException
from fastapi.testclient import TestClient

from lambdalake.operations.charts import line_chart
from lambdalake.operations.pipeline_status import (
    batch_freshness,
    gate_durations,
    quarantine_rate,
    run_durations,
    serving_drift,
    stream_lag,
    view_statuses,
)
from lambdalake.operations.status_page import create_status_app
from lambdalake.quality.history import record
from lambdalake.quality.verdict import ExpectationOutcome, GateResult
from lambdalake.settings import Settings

HOUR = datetime(2026, 11, 20, 10, tzinfo=UTC)  # fixed date: records only, no clock, no age check


def published(view: str, start_hour: int, at: datetime) -> dict[str, Any]:
    start = HOUR.replace(hour=start_hour)
    return {"view": view, "interval_start": start, "interval_end": start + timedelta(hours=1),
            "published_at": at}


def result(layer: str, subject: str, minute: int, *, rows: int = 0, seconds: float = 1.0,
           drifted: list[int] | None = None, success: bool = True) -> dict[str, Any]:
    outcomes = [{"check": f"drift:m{i}", "unexpected_count": count}
                for i, count in enumerate(drifted or [])]
    return {"layer": layer, "subject": subject, "start": HOUR.isoformat(),
            "end": (HOUR + timedelta(hours=1)).isoformat(), "success": success,
            "critical_failures": [] if success else outcomes,
            "warnings": [{"check": "stale:realtime", "unexpected_count": None},
                         *(outcomes if success else [])],
            "rows": rows, "seconds": seconds, "evaluated": 3,
            "recorded_at": (HOUR + timedelta(minutes=minute)).isoformat()}


def test_batch_freshness_is_how_far_the_newest_published_interval_ended_before_each_publish(
) -> None:
    first, second, third = (HOUR.replace(hour=13) + timedelta(minutes=m) for m in (0, 30, 45))
    series = batch_freshness([
        published("a", 10, first), published("a", 11, first),  # one publish, two intervals
        published("a", 8, second),  # a backfill of older hours: the newest end stays 12:00
        published("a", 12, third), published("b", 9, first)])
    assert series == {"a": [(first, 1.0), (second, 1.5), (third, 0.75)], "b": [(first, 3.0)]}


def test_stream_lag_is_per_query_and_skips_batches_recorded_without_it() -> None:
    series = stream_lag({
        "ingest": [{"query": "ingest", "timestamp": "2026-11-20T10:00:01.500Z", "lag": 40},
                   {"query": "ingest", "timestamp": "2026-11-20T10:00:03.000Z"}],
        "speed": [{"query": "page_traffic", "timestamp": "2026-11-20T10:00:02.000Z", "lag": 0}]})
    assert series == {
        "ingest ingest": [(HOUR + timedelta(seconds=1.5), 40.0)],
        "speed page_traffic": [(HOUR + timedelta(seconds=2), 0.0)]}


def test_serving_drift_is_the_share_of_compared_keys_that_drifted() -> None:
    series = serving_drift([
        result("serving", "funnel", 5, rows=200, drifted=[6, 4]),
        result("serving", "funnel", 10, rows=200, drifted=[3], success=False),
        result("serving", "funnel", 15, rows=0),  # nothing compared: no point
        result("batch", "funnel", 5, rows=200)])
    assert series == {"funnel": [(HOUR + timedelta(minutes=5), 5.0),
                                 (HOUR + timedelta(minutes=10), 1.5)]}


def test_the_quarantine_rate_counts_every_reason_in_every_hour_and_asks_bronze_only_when_needed(
) -> None:
    asked: list[datetime] = []

    def arrived(start: datetime, end: datetime) -> int:
        assert end - start == timedelta(hours=1)
        asked.append(start)
        return 96

    rows = ([{"kafka_timestamp": HOUR + timedelta(minutes=5), "quarantine_reason": "schema"}] * 3
            + [{"kafka_timestamp": HOUR + timedelta(minutes=59), "quarantine_reason": "json"}]
            + [{"kafka_timestamp": HOUR - timedelta(hours=5), "quarantine_reason": "json"}])
    series = quarantine_rate(rows, HOUR - timedelta(hours=1), HOUR + timedelta(hours=2), arrived)
    assert asked == [HOUR]
    hours = [HOUR - timedelta(hours=1), HOUR, HOUR + timedelta(hours=1)]
    assert series == {"json": list(zip(hours, [0.0, 1.0, 0.0], strict=True)),
                      "schema": list(zip(hours, [0.0, 3.0, 0.0], strict=True))}


def test_gate_and_run_durations() -> None:
    assert gate_durations([result("batch", "a", 1, seconds=2.5), result("bronze", "b", 2)]) == {
        "batch": [(HOUR + timedelta(minutes=1), 2.5)], "bronze": [(HOUR + timedelta(minutes=2), 1.0)]}
    runs = [{"dag_id": "lambdalake_batch_views", "start": HOUR, "end": HOUR + timedelta(seconds=90)},
            {"dag_id": "lambdalake_batch_views", "start": HOUR, "end": None}]  # running
    assert run_durations(runs) == {"lambdalake_batch_views": [(HOUR, 1.5)]}


def test_each_view_row_has_its_last_publish_and_the_verdict_of_its_newest_interval() -> None:
    older = {**result("batch", "funnel", 30, success=False),
             "start": (HOUR - timedelta(hours=1)).isoformat(), "end": HOUR.isoformat()}
    rows = view_statuses(
        ["funnel", "page_traffic"], {"funnel": {"high_water_mark": "2026-11-20T11:00:00+00:00"}},
        [published("funnel", 9, HOUR), published("funnel", 10, HOUR + timedelta(hours=1))],
        [older, result("batch", "funnel", 1), result("bronze", "funnel", 2)])
    funnel, traffic = rows
    assert funnel.last_published == HOUR + timedelta(hours=1)
    assert funnel.freshness == {"high_water_mark": "2026-11-20T11:00:00+00:00"}
    assert set(funnel.verdicts) == {"batch"} and funnel.verdicts["batch"]["success"]
    assert traffic.last_published is None and traffic.freshness is None and not traffic.verdicts


def test_a_chart_draws_one_line_per_series_and_says_when_there_is_nothing() -> None:
    chart = line_chart("Lag", "records", {"a": [(HOUR, 5.0), (HOUR + timedelta(hours=1), 0.0)],
                                          "<b>": [(HOUR, 1.0)], "empty": []})
    assert chart.count("<polyline") == 2 and chart.count("<circle") == 3
    assert "&lt;b&gt; (1)" in chart and "<b>" not in chart
    assert "11-20 10:00" in chart and "11-20 11:00" in chart  # the time axis, in UTC
    assert "Nothing recorded yet" in line_chart("Lag", "records", {"empty": []})


def require_token(authorization: str = Header("")) -> str:
    if authorization != "Bearer good":
        raise HTTPException(401, "Not authenticated")
    return "admin"


def test_the_page_shows_each_view_and_every_chart_behind_the_login(settings: Settings) -> None:
    drift = ExpectationOutcome("drift:pageviews", "reconcile_realtime_with_batch", "pageviews",
                               "warning", "equal", unexpected_count=2)
    record(GateResult("serving", "page_traffic", HOUR, HOUR + timedelta(hours=1), True, [],
                      [drift], 3, 40), settings, run_id="scheduled__1")
    freshness = {"page_traffic": {
        "high_water_mark": "2026-11-20T10:00:00+00:00",
        "batch_beyond_mark": [["2026-11-20T12:00:00+00:00", "2026-11-20T13:00:00+00:00"]],
        "late_rows_waiting": 7,
        "speed": {"watermark": "2026-11-20T13:50:00+00:00", "lag": 12,
                  "dropped_by_watermark_total": 3}}}
    runs = [{"dag_id": "lambdalake_batch_views", "run_id": "r", "start": HOUR,
             "end": HOUR + timedelta(minutes=2), "state": "success"}]
    app = create_status_app(require_token, lambda: runs, settings=lambda: settings,
                            freshness=lambda _: freshness)
    assert TestClient(app).get("/").status_code == 401
    page = TestClient(app, headers={"Authorization": "Bearer good"}).get("/").text
    row = re.search(r"<tr><td><a [^>]*>page_traffic</a>.*?</tr>", page)
    assert row is not None
    cells = re.findall(r"<td>(.*?)</td>", row.group(0))
    assert [re.sub(r"<[^>]+>", "", cell) for cell in cells[1:8]] == [
        "2026-11-20 10:00", "[2026-11-20 12:00, 2026-11-20 13:00)", "never",
        "2026-11-20 13:50", "12", "3", "7"]
    assert "passed, 1 warning" in cells[10]  # the serving gate's verdict
    for title in ("Batch freshness", "Stream lag", "Serving drift", "Quarantine rate by reason",
                  "Gate durations", "DAG run durations"):
        assert f"<h3>{title}</h3>" in page
    assert page.count("<polyline") == 3  # drift, the gate's duration, the run's
    assert "http://" not in page and "https://" not in page  # loads nothing


def test_the_page_says_when_the_query_api_does_not_answer(settings: Settings) -> None:
    def unreachable(_: Settings) -> dict[str, Any]:
        raise ConnectionError("connection refused")

    app = create_status_app(lambda: "admin", lambda: [], settings=lambda: settings,
                            freshness=unreachable)
    page = TestClient(app).get("/").text
    assert "The query API did not answer /freshness: ConnectionError: connection refused" in page
    assert "<h3>Stream lag</h3>" in page
