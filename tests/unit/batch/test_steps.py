"""The batch DAG's plan step: trigger-form params and data intervals, checked up front; and
how a gate step's failure fails its task."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from airflow.sdk.exceptions import AirflowFailException

from lambdalake.batch import steps
from lambdalake.batch.steps import BatchPlan, completeness_moment, events_end, plan_batch_run
from lambdalake.batch.written import SliceWritten, parse_results
from lambdalake.orchestration.spark_jobs import DATA_REJECTED_EXIT, SparkJobFailed
from lambdalake.settings import Settings

START = datetime(2026, 11, 20, 10, tzinfo=UTC)
END = START + timedelta(hours=1)


def test_a_scheduled_run_covers_its_data_interval_and_every_view() -> None:
    plan = plan_batch_run({}, START, END, "scheduled__x")
    assert (plan.start, plan.end, plan.full_reprocess) == (START, END, False)
    assert plan.views == ["funnel", "order_value", "page_traffic", "page_traffic_by_segment",
                          "page_traffic_rolling", "product_sales", "product_sales_by_category"]
    assert plan.interval_args == ["--start", "2026-11-20T10:00:00Z", "--end", "2026-11-20T11:00:00Z"]
    assert BatchPlan.from_xcom(plan.to_xcom()) == plan
    # page_traffic_rolling's last window, from 10:45, closes at 11:45; then the lateness
    assert events_end(plan) == END + timedelta(minutes=45)
    assert completeness_moment(plan) == END + timedelta(minutes=45 + 10)


def test_a_run_of_tumbling_views_reads_and_waits_for_its_interval_only() -> None:
    plan = plan_batch_run({"views": ["page_traffic", "funnel"]}, START, END, "manual__x")
    assert events_end(plan) == END
    assert completeness_moment(plan) == END + timedelta(minutes=10)  # the views' lateness


def test_a_data_interval_set_on_purpose_is_computed_as_it_is() -> None:
    """Set in the form (*Specify Manually*) or through the REST API: hours or days, aligned
    to the views' grain, never moved to the schedule's intervals; unaligned (such as the
    hour ending "now" that Airflow's own delta timetable would infer), the plan refuses it."""
    triggered = datetime(2026, 11, 20, 19, 50, 12, tzinfo=UTC)
    days = (datetime(2026, 11, 18, tzinfo=UTC), datetime(2026, 11, 20, 6, tzinfo=UTC))
    plan = plan_batch_run({"views": ["funnel"]}, *days, "manual__x")
    assert (plan.start, plan.end, plan.views) == (*days, ["funnel"])
    with pytest.raises(ValueError, match="not aligned"):
        plan_batch_run({}, triggered - timedelta(hours=1), triggered, "manual__y")


@pytest.mark.parametrize(("params", "conf", "interval", "message"), [
    ({"views": ["nope"]}, {}, (START, END), "unknown views"),
    ({}, {"start": "2026-11-19T00:00:00Z", "end": "2026-11-19T01:00:00Z"}, (START, END),
     "the run computes its data interval"),
    ({}, {}, (START + timedelta(minutes=30), END), "not aligned"),
    ({}, {}, (END, START), "empty interval"),
    ({}, {}, (START.replace(tzinfo=None), END.replace(tzinfo=None)), "timezone-aware"),
    ({}, {}, (None, None), "no data interval"),
    ({"views": ["funnel"]}, {"restating": {"page_traffic": {
        "rows": 1, "events": 1, "computed_from": 3}}}, (START, END), "one of this run's views"),
    ({}, {"restating": {"funnel": {"rows": -1, "events": 1, "computed_from": 3}}},
     (START, END), "non-negative integers"),
    ({}, {"restating": {"funnel": {"rows": 1}}}, (START, END), "non-negative integers"),
])
def test_bad_params_fail_the_plan_with_a_clear_message(
    params: dict, conf: dict, interval: tuple[datetime | None, datetime | None], message: str,
) -> None:
    with pytest.raises(ValueError, match=message):
        plan_batch_run(params, *interval, "manual__x", conf=conf)


def test_a_restatement_carries_its_late_rows_from_the_conf_to_the_publication() -> None:
    """The restatement DAG passes them in the run's conf; the form has no such field (a
    param of the same name is not read)."""
    late = {"rows": 5, "events": 4, "computed_from": 17}
    hour = (datetime(2026, 11, 19, tzinfo=UTC), datetime(2026, 11, 19, 1, tzinfo=UTC))
    conf = {"views": ["funnel"], "restating": {"funnel": late}}
    plan = plan_batch_run({"views": ["funnel"]}, *hour, "restate__x", conf=conf)
    assert (plan.start, plan.end, plan.restating) == (*hour, {"funnel": late})
    assert BatchPlan.from_xcom(plan.to_xcom()) == plan
    assert plan_batch_run({"restating": {"funnel": late}}, START, END,
                          "scheduled__x").restating is None


def test_a_full_reprocess_needs_no_interval() -> None:
    plan = plan_batch_run({"full_reprocess": True, "views": ["page_traffic"]}, None, None, "m")
    assert plan.full_reprocess and plan.start is None
    assert BatchPlan.from_xcom(plan.to_xcom()) == plan
    with pytest.raises(ValueError, match="no interval"):
        plan.interval_args  # noqa: B018


def test_the_slices_written_cross_the_job_output_and_xcom_typed() -> None:
    written = SliceWritten("funnel", START, END, 3, bronze_version=7, view_version=1,
                           table_version=12)
    line = ('result {"view": "funnel", "start": "2026-11-20T10:00:00+00:00", "end": '
            '"2026-11-20T11:00:00+00:00", "rows": 3, "bronze_version": 7, "view_version": 1, '
            '"table_version": 12}')
    assert written.result_line() == line
    assert parse_results(["batch: funnel ...", line, "other"]) == [written]
    assert json.loads(line.removeprefix("result ")) == written.to_xcom()  # XCom's JSON
    assert SliceWritten.from_xcom(written.to_xcom()) == written
    assert written.describe("the run's staging table for view version 1") == (
        "funnel [2026-11-20 10:00, 2026-11-20 11:00): 3 rows from bronze's Delta version 7 "
        "into the run's staging table for view version 1, now at Delta version 12")


def gate_step_exiting(code: int) -> Callable[..., list[str]]:
    def step(job: str, args: list[str]) -> list[str]:
        raise SparkJobFailed(job, code)
    return step


def test_data_failing_a_gate_fails_the_task_without_retries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(steps, "run_spark_job", gate_step_exiting(DATA_REJECTED_EXIT))
    with pytest.raises(AirflowFailException, match="the data failed its critical checks") as e:
        steps.run_gate(["--layer", "bronze"])
    assert isinstance(e.value.__cause__, SparkJobFailed)


def test_a_gate_that_could_not_validate_keeps_the_tasks_retries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(steps, "run_spark_job", gate_step_exiting(1))
    with pytest.raises(SparkJobFailed) as e:
        steps.run_gate(["--layer", "bronze"])
    assert e.value.exit_code == 1 and not isinstance(e.value, AirflowFailException)


def test_compute_reads_the_bronze_version_its_gate_step_reported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The bronze gate step pins bronze's version and prints it; compute gets that version,
    whatever reached bronze since (the task process opens no Delta table itself)."""
    from lambdalake.batch.written import gated_bronze_line

    steps_run: list[list[str]] = []

    def spark_step(job: str, args: list[str]) -> list[str]:
        steps_run.append([job, *args])
        return ["gate bronze [...]: passed", gated_bronze_line(41)] if job == "validate" else []

    monkeypatch.setattr(steps, "run_spark_job", spark_step)
    plan = plan_batch_run({"views": ["page_traffic"]}, START, END, "scheduled__1")
    gated = steps.gate_bronze(plan)
    steps.compute(plan, gated)
    [gate, recompute] = steps_run
    assert "--bronze-version" not in gate  # the step pins it when it starts
    assert (gated, recompute[recompute.index("--bronze-version") + 1]) == (41, "41")


def test_gate_views_validates_the_staged_slices_at_the_bronze_version_compute_read(
    monkeypatch: pytest.MonkeyPatch, settings: Settings,
) -> None:
    steps_run: list[list[str]] = []
    monkeypatch.setattr(steps, "run_spark_job",
                        lambda job, args: steps_run.append([job, *args]) or [])
    plan = plan_batch_run({"views": ["page_traffic", "funnel"]}, START, END, "scheduled__1")
    written = [SliceWritten(view, START, END, 3, 41, 1, 0).to_xcom()
               for view in ("page_traffic", "funnel")]
    steps.gate_views(settings, plan, written)
    [[job, *args]] = steps_run
    assert job == "validate" and "--staged" in args
    assert args[args.index("--bronze-version") + 1] == "41"
    assert args[args.index("--run-id") + 1] == "scheduled__1"


def test_a_full_reprocess_whose_carried_slice_is_rejected_fails_without_retries(
    monkeypatch: pytest.MonkeyPatch, settings: Settings,
) -> None:
    monkeypatch.setattr(steps, "run_spark_job", gate_step_exiting(DATA_REJECTED_EXIT))
    plan = plan_batch_run({"views": ["page_traffic"], "full_reprocess": True}, None, None,
                          "manual__1")
    built = [SliceWritten("page_traffic", START, END, 3, 41, 2, 0).to_xcom()]
    with pytest.raises(AirflowFailException, match="the data failed its critical checks"):
        steps.publish(settings, plan, built)


def test_publish_announces_exactly_the_views_it_published_each_with_what_it_published() -> None:
    """Airflow's own accessor mapping, as the task gets it: the events go through the alias,
    one per published view, on that view's asset; no other view hears of the run."""
    from airflow.sdk import Asset, AssetAlias
    from airflow.sdk.execution_time.context import OutletEventAccessors

    from lambdalake.views import PUBLISHED_ALIAS

    published = [
        steps.Published("page_traffic", START, END, END, 1, 12, 40, True, False),
        steps.Published("funnel", START, END, START, 2, 3, 0, False, False),
    ]
    outlet_events = OutletEventAccessors()
    steps.announce(outlet_events, published)

    assert [key.name for key in outlet_events] == [PUBLISHED_ALIAS]
    events = outlet_events[AssetAlias(PUBLISHED_ALIAS)].asset_alias_events
    assert [(e.source_alias_name, e.dest_asset_key.uri, e.dest_asset_key.name) for e in events] \
        == [(PUBLISHED_ALIAS, "lambdalake://views/page_traffic", "lambdalake://views/page_traffic"),
            (PUBLISHED_ALIAS, "lambdalake://views/funnel", "lambdalake://views/funnel")]
    assert events[0].dest_asset_key.to_asset() == Asset(uri="lambdalake://views/page_traffic")
    assert events[0].extra == {
        "view": "page_traffic", "start": "2026-11-20T10:00:00Z", "end": "2026-11-20T11:00:00Z",
        "high_water_mark": "2026-11-20T11:00:00Z", "view_version": 1, "delta_version": 12,
        "rows": 40, "restatement": True, "full_reprocess": False,
        "previous_high_water_mark": None}
    assert json.loads(json.dumps(events[1].extra))["high_water_mark"] == "2026-11-20T10:00:00Z"


def test_a_publish_says_what_it_published_and_how_far_the_mark_moved() -> None:
    restated = steps.Published("page_traffic", START, END, END, 1, 12, 40, True, False, END)
    assert restated.describe() == (
        "page_traffic: published [2026-11-20T10:00:00Z, 2026-11-20T11:00:00Z) as a "
        "restatement, 40 rows, view version 1 at Delta version 12; high-water mark stays at "
        "2026-11-20T11:00:00Z")
    reprocessed = steps.Published("funnel", None, None, END, 3, 0, 9, False, True, START)
    assert reprocessed.describe().startswith("funnel: published all of it (full reprocess), ")
    assert reprocessed.describe().endswith(
        "high-water mark moved from 2026-11-20T10:00:00Z to 2026-11-20T11:00:00Z")


def test_a_full_reprocess_announces_all_of_the_view_replaced() -> None:
    from airflow.sdk.execution_time.context import OutletEventAccessors

    outlet_events = OutletEventAccessors()
    steps.announce(outlet_events, [steps.Published("funnel", None, None, END, 3, 0, 9, False, True)])
    [alias] = outlet_events.values()
    [event] = alias.asset_alias_events
    assert (event.extra["start"], event.extra["end"], event.extra["full_reprocess"],
            event.extra["view_version"]) == (None, None, True, 3)
