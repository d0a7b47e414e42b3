"""Turning late rows into restatement runs: per published interval, oldest first, bounded,
never beside a run of an overlapping interval; and the restatement log."""

from __future__ import annotations

from datetime import datetime

from lambdalake.batch.late_arrivals import LateArrivals
from lambdalake.batch.publication import read_publications
from lambdalake.batch.restatement import (
    LateRows,
    Restatement,
    plan_restatements,
    read_restatements,
    record_restatement,
)
from lambdalake.settings import Settings
from lambdalake.views.definition import ViewDefinition
from tests.support.late_rows import arrive, hour, publish_from


def plan(lake: Settings, views: list[ViewDefinition], busy: list[tuple[datetime, datetime]],
         limit: int = 4) -> list[Restatement]:
    waiting = LateArrivals(lake, views).waiting()
    return plan_restatements(waiting, read_publications(lake), busy, limit)


def test_one_run_per_published_interval_with_every_view_waiting_in_it_oldest_first(
    lake: Settings, views: list[ViewDefinition],
) -> None:
    first = arrive(lake, [("a", "page_view", 0.5)])
    publish_from(lake, first, 0, 1, 2, 3)
    arrive(lake, [("b", "page_view", 3.5), ("c", "purchase", 1.5), ("c", "purchase", 1.5),
                  ("d", "page_view", 1.2)])
    assert plan(lake, views, busy=[]) == [
        Restatement(hour(1), hour(2), {"page_traffic": LateRows(1, 1, first),
                                       "product_sales": LateRows(2, 1, first)}),
        Restatement(hour(3), hour(4), {"page_traffic": LateRows(1, 1, first)})]
    assert [r.start for r in plan(lake, views, busy=[], limit=1)] == [hour(1)]
    assert plan(lake, views, busy=[], limit=0) == []


def test_an_interval_a_batch_run_is_computing_is_left_for_the_next_cycle(
    lake: Settings, views: list[ViewDefinition],
) -> None:
    first = arrive(lake, [("a", "page_view", 0.5)])
    publish_from(lake, first, 0, 1, 2, 3)
    arrive(lake, [("b", "page_view", 3.5), ("d", "page_view", 1.2)])
    assert [r.start for r in plan(lake, views, busy=[(hour(0), hour(2))])] == [hour(3)]
    assert plan(lake, views, busy=[(hour(0), hour(24))]) == []


def test_a_window_is_restated_with_the_whole_interval_its_run_published(
    lake: Settings, views: list[ViewDefinition],
) -> None:
    first = arrive(lake, [("a", "page_view", 0.5)])
    publish_from(lake, first, 0, length=24)  # a daily batch interval of hourly windows
    arrive(lake, [("b", "page_view", 3.5), ("d", "page_view", 1.2), ("e", "page_view", 1.3)])
    (restatement,) = plan(lake, views, busy=[])
    assert (restatement.start, restatement.end) == (hour(0), hour(24))
    assert restatement.views == {"page_traffic": LateRows(3, 3, first)}
    assert restatement.conf() == {  # the interval is the run's data interval
        "views": ["page_traffic"],
        "restating": {"page_traffic": {"rows": 3, "events": 3, "computed_from": first}}}
    assert restatement.run_id(hour(30)) == "restate__2026-11-20T00:00:00Z__20261121T060000"
    cause = "scheduled__2026-11-21T05:50:00+00:00"
    assert restatement.note(cause) == (
        "Triggered by [lambdalake_restatement run scheduled__2026-11-21T05:50:00+00:00]"
        "(/dags/lambdalake_restatement/runs/scheduled__2026-11-21T05%3A50%3A00%2B00%3A00): "
        "restates [2026-11-20T00:00:00Z, 2026-11-21T00:00:00Z) for the late rows that "
        f"reached bronze after it was published: `page_traffic` 3 rows (3 events; slice "
        f"computed from bronze v{first}).")


def test_rows_waiting_say_since_when(lake: Settings, views: list[ViewDefinition]) -> None:
    first = arrive(lake, [("a", "page_view", 0.5)])
    publish_from(lake, first, 0)
    before = datetime.now().astimezone()
    arrive(lake, [("b", "page_view", 0.7)])
    (page_traffic, _) = LateArrivals(lake, views).waiting()
    assert page_traffic.waiting_since is not None
    assert abs((page_traffic.waiting_since - before).total_seconds()) < 60
    assert page_traffic.rows == 1 and page_traffic.oldest == hour(0)


def test_each_restatement_is_logged_with_interval_rows_versions_and_run(lake: Settings) -> None:
    assert read_restatements(lake) == []
    for _ in range(2):  # the second time: publish retried after its commit's answer was lost
        record_restatement(lake, hour(0), hour(1),
                           {"page_traffic": {"rows": 3, "events": 2, "computed_from": 4},
                            "funnel": {"rows": 1, "events": 1, "computed_from": 4}},
                           {"page_traffic": 9}, "restate__run")
    (row,) = read_restatements(lake)  # funnel was not written: nothing to log for it
    assert {k: v for k, v in row.items() if k != "restated_at"} == {
        "view": "page_traffic", "interval_start": hour(0), "interval_end": hour(1),
        "late_rows": 3, "late_events": 2, "computed_from": 4, "bronze_version": 9,
        "run_id": "restate__run"}
