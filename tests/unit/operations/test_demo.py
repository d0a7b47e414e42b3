"""What ``make demo`` produces and recomputes (its run on the real stack:
``tests/e2e/test_platform.py``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from lambdalake.generator.traffic import TrafficGenerator
from lambdalake.operations.demo import example_queries, plan_demo
from lambdalake.settings import Settings
from lambdalake.views.definition import load_views
from tests.support.settings_factory import MakeSettings

NOW = datetime(2026, 11, 22, 12, 25, 7, tzinfo=UTC)


def test_traffic_covers_the_past_hours_and_stays_within_the_lateness_allowance(
    settings: Settings
) -> None:
    plan = plan_demo(settings, 5_000, 7, NOW)
    events = [r.event for r in TrafficGenerator(plan.profile).records() if r.kind == "valid"]
    times = sorted(datetime.fromisoformat(e["occurred_at"]) for e in events)
    allowance = timedelta(seconds=min(v.lateness_seconds for v in load_views().values()))
    assert NOW - timedelta(hours=3) - allowance < times[0] < NOW - timedelta(hours=2, minutes=50)
    assert NOW - timedelta(minutes=1) < times[-1] <= NOW
    head = plan.profile.start_time
    assert head is not None
    step = timedelta(seconds=1 / plan.profile.event_time_rate)
    lateness = [head + i * step - t for i, t in enumerate(
        datetime.fromisoformat(e["occurred_at"]) for e in events)]
    assert max(lateness) < allowance  # nothing the speed layer would drop as too late


def test_reference_data_comes_with_the_first_run_only(settings: Settings) -> None:
    assert plan_demo(settings, 5_000, 7, NOW).profile.reference_change_every > 0
    assert plan_demo(settings, 5_000, 7, NOW, with_reference=False
                     ).profile.reference_change_every == 0


def test_batch_covers_the_first_day_to_the_last_hour_whose_windows_closed_and_lateness_passed(
    make_settings: MakeSettings
) -> None:
    """Every hour a scheduled run may already have published (so a re-run's traffic reaches
    it), and none whose completeness wait would still hold the run: page_traffic_rolling's
    windows starting in an hour close 45 minutes after it, then 10 minutes of lateness."""
    settings = make_settings(batch={"start_date": "2026-11-20"})
    plan = plan_demo(settings, 1_000, 7, NOW)  # 12:25: the hour from 11:00 waits until 12:55
    assert plan.batch_start == datetime(2026, 11, 20, tzinfo=UTC)
    assert plan.batch_end == datetime(2026, 11, 22, 11, tzinfo=UTC)
    wait = timedelta(minutes=45 + 10)
    end = datetime(2026, 11, 22, 12, tzinfo=UTC)  # the hour [11:00, 12:00) is in from 12:55
    assert plan_demo(settings, 1_000, 7, end + wait - timedelta(seconds=1)).batch_end == (
        end - timedelta(hours=1))
    assert plan_demo(settings, 1_000, 7, end + wait).batch_end == end
    urls = example_queries(settings, plan)
    assert [url.split("?")[0] for url in urls] == [
        f"{settings.serving.base_url}/views/page_traffic/rows",
        f"{settings.serving.base_url}/views/funnel/rows",
        f"{settings.serving.base_url}/views/product_sales_by_category/rows"]
    assert all("from=2026-11-22T09%3A00%3A00Z" in url for url in urls)  # spans the mark
