"""The query API's /metrics over small Delta tables (no JVM): per view the serving boundary
and what waits, per layer the recorded gate verdicts, in Prometheus' format."""

from __future__ import annotations

from datetime import date
from typing import Any

from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from lambdalake.quality.history import append
from lambdalake.serving.api import create_app
from tests.support.serving_tables import append_realtime, hour, publish_hours, write_batch
from tests.support.settings_factory import MakeSettings


def gate(layer: str, subject: str, success: bool, warnings: int, seconds: float,
         recorded_at: str) -> dict[str, Any]:
    return {"layer": layer, "subject": subject, "suite": f"{layer}.{subject}",
            "start": "2026-11-20T00:00:00+00:00", "end": "2026-11-20T01:00:00+00:00",
            "success": success, "critical_failures": [] if success else [{"check": "rows"}],
            "warnings": [{"check": "drift"}] * warnings, "evaluated": 3, "rows": 10,
            "seconds": seconds, "recorded_at": recorded_at}


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def test_metrics_say_each_views_boundary_and_each_layers_verdicts(
    make_settings: MakeSettings,
) -> None:
    lake = make_settings(batch={"start_date": date(2026, 11, 20)})
    write_batch(lake, [(0, "/a", 10), (3, "/a", 4)])
    publish_hours(lake, 0, 3)  # hour 0 moves the mark to 01:00; hour 3 lies beyond a gap
    append_realtime(lake, 0, [(1, "/a", 3)])
    append(lake, [gate("batch", "page_traffic", True, 0, 0.5, "2026-11-20T01:05:00+00:00"),
                  gate("batch", "page_traffic", False, 0, 1.5, "2026-11-20T02:05:00+00:00"),
                  gate("batch", "funnel", True, 2, 1.0, "2026-11-20T02:06:00+00:00"),
                  gate("bronze", "bronze_events", True, 0, 2.0, "2026-11-20T02:07:00+00:00")])
    with TestClient(create_app(lake)) as client:
        answer = client.get("/metrics")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
    found = samples(answer.text)
    page = (("view", "page_traffic"),)
    assert found["lambdalake_batch_high_water_mark_timestamp_seconds", page] == \
        hour(1).timestamp()
    assert found["lambdalake_batch_high_water_mark_age_seconds", page] > 0
    assert found["lambdalake_batch_published_beyond_mark_seconds", page] == 3600
    assert found["lambdalake_realtime_newest_update_timestamp_seconds", page] == \
        hour(1).timestamp()  # the row's hour plus its batch id (0) in minutes
    assert found["lambdalake_batch_late_rows_waiting", page] == 0
    assert ("lambdalake_realtime_newest_update_timestamp_seconds",
            (("view", "funnel"),)) not in found  # no real-time write yet
    assert {labels: value for (name, labels), value in found.items()
            if name == "lambdalake_quality_gate_runs_total"} == {
        (("layer", "batch"), ("verdict", "passed")): 1,
        (("layer", "batch"), ("verdict", "failed")): 1,
        (("layer", "batch"), ("verdict", "warned")): 1,
        (("layer", "bronze"), ("verdict", "passed")): 1}
    assert found["lambdalake_quality_gate_duration_seconds_sum", (("layer", "batch"),)] == 3.0
    assert found["lambdalake_quality_gate_duration_seconds_count", (("layer", "batch"),)] == 3
    assert found["lambdalake_quality_gate_last_passed", (
        ("layer", "batch"), ("subject", "page_traffic"))] == 0  # its newest failed
    assert found["lambdalake_quality_gate_last_passed", (
        ("layer", "batch"), ("subject", "funnel"))] == 1


def test_metrics_need_the_token_when_one_is_configured(make_settings: MakeSettings) -> None:
    lake = make_settings(batch={"start_date": date(2026, 11, 20)},
                         serving={"api_token": "s3cret-token"})
    with TestClient(create_app(lake)) as client:
        assert client.get("/metrics").status_code == 401
        assert client.get("/metrics", headers={
            "Authorization": "Bearer s3cret-token"}).status_code == 200
