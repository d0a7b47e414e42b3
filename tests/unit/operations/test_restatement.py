"""One restatement cycle: what it triggers through Airflow's API, what it leaves for later,
and the warning when late rows wait too long (Airflow's API answered in memory)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any, cast

import pytest

from lambdalake.operations.restatement import (
    BATCH_DAG_ID,
    restatement_cycle,
    run_interval,
    warn_after_seconds,
)
from lambdalake.orchestration.airflow_api import AirflowClient
from lambdalake.quality.history import read_results
from lambdalake.settings import Settings
from lambdalake.timeutil import parse_utc
from lambdalake.views.definition import load_views
from tests.support.late_rows import arrive, hour, publish_from
from tests.support.settings_factory import MakeSettings


class Airflow:
    """The calls a cycle makes, answered from lists."""

    def __init__(self, active: list[dict[str, Any]],
                 finished: list[dict[str, Any]] | None = None) -> None:
        self.active = active
        self.finished = finished or []
        self.triggered: list[tuple[str, dict[str, Any], tuple[datetime, datetime], str]] = []

    def active_runs(self, dag_id: str) -> list[dict[str, Any]]:
        assert dag_id == BATCH_DAG_ID
        return self.active

    def dag_runs(self, dag_id: str, ended_after: datetime | None = None
                 ) -> list[dict[str, Any]]:
        """Airflow's ``end_date_gte``: only runs that ended, and not before ``ended_after``."""
        assert dag_id == BATCH_DAG_ID
        if ended_after is None:
            return self.active + self.finished
        return [run for run in self.finished
                if run.get("end_date") and parse_utc(run["end_date"]) >= ended_after]

    def trigger(self, dag_id: str, conf: dict[str, Any], run_id: str,
                interval: tuple[datetime, datetime], note: str) -> str:
        self.triggered.append((run_id, conf, interval, note))
        return run_id


@pytest.fixture
def lake(make_settings: MakeSettings) -> Settings:
    return make_settings(batch={"start_date": date(2026, 11, 20), "restate_max_intervals": 2})


def late_rows_in_three_hours(lake: Settings) -> None:
    first = arrive(lake, [("a", "page_view", 0.5)])
    publish_from(lake, first, 0, 1, 2, 3)
    arrive(lake, [("b", "page_view", 0.7), ("c", "page_view", 2.5), ("d", "page_view", 3.5)])


def cycle(lake: Settings, airflow: Airflow, now: datetime) -> Any:
    return restatement_cycle(lake, cast(AirflowClient, airflow), now, "scheduled__cycle")


def test_a_cycle_triggers_the_oldest_intervals_it_has_room_for(lake: Settings) -> None:
    late_rows_in_three_hours(lake)
    running = {"dag_run_id": "restate__earlier", "state": "running",
               "conf": {"views": ["page_traffic"]},
               "data_interval_start": "2026-11-20T03:00:00Z",
               "data_interval_end": "2026-11-20T04:00:00Z"}
    scheduled = {"dag_run_id": "scheduled__0", "state": "queued", "conf": {},
                 "data_interval_start": "2026-11-20T00:00:00Z",
                 "data_interval_end": "2026-11-20T01:00:00Z"}
    airflow = Airflow([running, scheduled])
    done = cycle(lake, airflow, datetime.now(UTC))
    # hour 0 is being computed, hour 3 restated; one restatement runs: room for one more
    assert [(interval, conf["views"]) for _, conf, interval, _ in airflow.triggered] == [
        ((hour(2), hour(3)), ["page_traffic"])]
    assert [run_id for run_id, _ in done.triggered] == [
        run_id for run_id, *_ in airflow.triggered]
    assert done.still_running == ["restate__earlier"] and done.overdue == []
    assert any("triggered restate__2026-11-20T02:00:00Z" in line for line in done.describe())


def test_a_restatement_run_carries_its_interval_late_rows_and_cause(lake: Settings) -> None:
    """Triggered with the restated interval as its data interval (its page shows it), the
    late rows in its conf for the batch DAG's plan, and a note linking the cycle's run."""
    from lambdalake.batch.steps import plan_batch_run

    late_rows_in_three_hours(lake)
    airflow = Airflow([])
    cycle(lake, airflow, datetime.now(UTC))
    run_id, conf, interval, note = airflow.triggered[0]
    assert interval == (hour(0), hour(1))
    assert sorted(conf) == ["restating", "views"] and conf["views"] == ["page_traffic"]
    late = conf["restating"]["page_traffic"]
    assert (late["rows"], late["events"], sorted(late)) == (1, 1, [
        "computed_from", "events", "rows"])
    assert note.startswith("Triggered by [lambdalake_restatement run scheduled__cycle]"
                           "(/dags/lambdalake_restatement/runs/scheduled__cycle): restates "
                           "[2026-11-20T00:00:00Z, 2026-11-20T01:00:00Z)")
    assert "`page_traffic` 1 rows" in note
    plan = plan_batch_run({"views": conf["views"]}, *interval, run_id, conf=conf)
    assert (plan.start, plan.end, plan.restating) == (hour(0), hour(1), conf["restating"])


def test_the_cycles_note_links_every_run_it_triggered_and_a_cycle_that_triggered_none_has_none(
    lake: Settings,
) -> None:
    late_rows_in_three_hours(lake)
    done = cycle(lake, Airflow([]), datetime.now(UTC))
    assert len(done.triggered) == 2  # hours 0 and 2 (restate_max_intervals)
    note = done.note()
    assert note is not None
    for run_id, restatement in done.triggered:
        assert (f"[lambdalake_batch_views run {run_id}](/dags/lambdalake_batch_views/runs/"
                f"{run_id.replace(':', '%3A')}) restates [{restatement.start:%Y-%m-%dT%H:%M:%SZ}, "
                f"{restatement.end:%Y-%m-%dT%H:%M:%SZ}) for page_traffic") in note
    assert cycle(lake, Airflow([{"dag_run_id": "restate__a", "state": "running", "conf": {}},
                                {"dag_run_id": "restate__b", "state": "running", "conf": {}}]),
                 datetime.now(UTC)).note() is None  # no room: nothing triggered


def test_an_interval_whose_restatement_failed_lately_waits_before_a_retry(
    lake: Settings,
) -> None:
    late_rows_in_three_hours(lake)
    now = datetime.now(UTC)

    def failed(hour: int, minutes_ago: int) -> dict[str, Any]:
        return {"dag_run_id": f"restate__h{hour}", "state": "failed",
                "end_date": (now - timedelta(minutes=minutes_ago)).isoformat(),
                "conf": {"views": ["page_traffic"]},
                "data_interval_start": f"2026-11-20T0{hour}:00:00Z",
                "data_interval_end": f"2026-11-20T0{hour + 1}:00:00Z"}

    airflow = Airflow([], [failed(0, minutes_ago=5), failed(2, minutes_ago=90),
                           {**failed(3, minutes_ago=1), "state": "success"}])
    done = cycle(lake, airflow, now)  # retry after 60 minutes: hour 0 waits, 2 does not
    assert [interval[0] for _, _, interval, _ in airflow.triggered] == [hour(2), hour(3)]
    assert done.held_back == ["restate__h0"]
    assert "restatement run restate__h0 failed lately" in "\n".join(done.describe())


def test_rows_waiting_too_long_record_a_quality_warning(lake: Settings) -> None:
    late_rows_in_three_hours(lake)
    allowed = warn_after_seconds(lake, list(load_views().values()))
    assert allowed == 3600 + 600 + 2 * 600  # an interval, the lateness, two cycles
    later = datetime.now(UTC) + timedelta(seconds=allowed + 60)
    done = cycle(lake, Airflow([]), later)
    assert [w.view for w in done.overdue] == ["page_traffic"]
    (warning,) = read_results(lake)
    assert (warning["layer"], warning["subject"], warning["success"]) == (
        "restatement", "page_traffic", True)
    (outcome,) = warning["warnings"]
    assert outcome["check"] == "late_rows_restated_in_time"
    assert outcome["observed"]["rows"] == 3 and outcome["observed"]["windows"] == 3


def test_the_interval_of_an_active_run_is_its_data_interval() -> None:
    assert run_interval({"conf": {"full_reprocess": True}}) is None
    assert run_interval({"conf": {}, "data_interval_start": "2026-11-20T00:00:00+00:00",
                         "data_interval_end": "2026-11-20T01:00:00+00:00"}) == (hour(0), hour(1))
    assert run_interval({"conf": None, "data_interval_start": None}) is None
