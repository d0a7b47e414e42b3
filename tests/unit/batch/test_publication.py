"""The batch high-water mark and the view catalog: small Delta tables, no Spark."""

from __future__ import annotations

import itertools
import random
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, date, datetime, timedelta

import pytest

from lambdalake.batch.publication import HighWaterMarks, Publication, high_water_marks, publish
from lambdalake.settings import Settings
from lambdalake.views.catalog import (
    current_table_path,
    current_version,
    read_catalog,
    switch_version,
    version_before,
)
from tests.support.settings_factory import MakeSettings

DAY = date(2026, 11, 20)
MIDNIGHT = datetime(2026, 11, 20, tzinfo=UTC)
HOUR = timedelta(hours=1)


@pytest.fixture
def lake(make_settings: MakeSettings) -> Settings:
    return make_settings(batch={"start_date": DAY})


def hours(*offsets: int) -> list[Publication]:
    return [Publication("page_traffic", MIDNIGHT + timedelta(hours=h),
                        MIDNIGHT + timedelta(hours=h + 1), 1, 7, "run") for h in offsets]


def test_the_mark_starts_at_the_first_day_and_stops_at_a_gap(lake: Settings) -> None:
    assert high_water_marks(lake).of("page_traffic") == MIDNIGHT
    publish(lake, hours(0, 1, 3))
    assert high_water_marks(lake).of("page_traffic") == MIDNIGHT + timedelta(hours=2)
    publish(lake, hours(2))  # the gap is filled: the mark jumps over the hour published before
    assert high_water_marks(lake).of("page_traffic") == MIDNIGHT + timedelta(hours=4)
    assert high_water_marks(lake).of("funnel") == MIDNIGHT  # per view


def test_a_retried_publish_records_its_slices_once_and_a_recomputed_one_again(
    lake: Settings,
) -> None:
    from lambdalake.batch.publication import read_publications

    publish(lake, hours(0, 1))
    publish(lake, hours(0, 1))  # the task retried after its commit's answer was lost
    recomputed = [Publication("page_traffic", MIDNIGHT, MIDNIGHT + HOUR, 1, 8, "run")]
    publish(lake, recomputed)  # the same run's interval from a newer bronze version
    assert sorted((r["interval_start"].hour, r["bronze_version"])
                  for r in read_publications(lake)) == [(0, 7), (0, 8), (1, 7)]


def test_republishing_and_older_history_never_move_the_mark_back(lake: Settings) -> None:
    publish(lake, hours(0, 1))
    publish(lake, hours(0, 1, -5, -30))  # a backfill of the same hours and of older days
    assert high_water_marks(lake).of("page_traffic") == MIDNIGHT + timedelta(hours=2)


def test_marks_kept_as_publications_arrive_are_where_the_covered_hours_stop() -> None:
    """Whatever the order and batching of publications, with repeats, overlaps and older
    history, the kept mark is the first hour from the first day that nothing covers, and
    what lies beyond it is every covered hour after that, in runs that do not touch."""
    rng = random.Random(7)
    for _ in range(300):
        arriving = [(start, start + rng.choice((1, 1, 2, 3)))
                    for start in (rng.randrange(-4, 24) for _ in range(rng.randrange(1, 30)))]
        marks, seen = HighWaterMarks(DAY), []
        while arriving:
            taken = rng.randrange(1, 6)
            batch, arriving = arriving[:taken], arriving[taken:]
            seen += batch
            marks.add([{"view": "page_traffic", "interval_start": MIDNIGHT + timedelta(hours=s),
                        "interval_end": MIDNIGHT + timedelta(hours=e)} for s, e in batch])
            covered = {h for s, e in seen for h in range(s, e)}
            first_gap = next(h for h in itertools.count() if h not in covered)
            assert marks.of("page_traffic") == MIDNIGHT + timedelta(hours=first_gap), seen
            runs = [((s - MIDNIGHT) // HOUR, (e - MIDNIGHT) // HOUR)
                    for s, e in marks.beyond("page_traffic")]
            assert {h for s, e in runs for h in range(s, e)} == {
                h for h in covered if h > first_gap}, seen  # what batch answers beyond it
            assert all(end < next_start for (_, end), (next_start, _) in itertools.pairwise(runs))
        assert marks.of("funnel") == MIDNIGHT


def test_concurrent_publishers_all_land(lake: Settings) -> None:
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda h: publish(lake, hours(h)), range(8)))
    assert high_water_marks(lake).of("page_traffic") == MIDNIGHT + timedelta(hours=8)


def test_a_switch_moves_readers_to_the_new_version(lake: Settings) -> None:
    assert current_version(lake, "funnel") == 1
    assert current_table_path(lake, "funnel").endswith("/view_funnel_v1")
    assert version_before(read_catalog(lake), "funnel") is None  # never switched
    switch_version(lake, "funnel", 2, "reprocess-1")
    assert current_version(lake, "funnel") == 2
    assert current_table_path(lake, "funnel").endswith("/view_funnel_v2")
    assert current_version(lake, "page_traffic") == 1
    assert version_before(read_catalog(lake), "funnel") == 1  # what a retried switch finishes
    switch_version(lake, "funnel", 3, "reprocess-2")
    assert version_before(read_catalog(lake), "funnel") == 2
