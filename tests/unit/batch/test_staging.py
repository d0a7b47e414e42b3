"""Write-audit-publish on a local lake (delta-rs, no Spark): a run's staged slice is seen by
no reader until its publish copies it, once, into the table readers use."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from lambdalake.batch.publication import read_publications
from lambdalake.batch.staging import (
    discard,
    discard_stale,
    promote,
    promote_run,
    staging_path,
)
from lambdalake.batch.steps import BatchPlan, Published, publish
from lambdalake.batch.written import SliceWritten
from lambdalake.settings import Settings
from lambdalake.views.catalog import current_table_path, switch_version
from tests.support.settings_factory import MakeSettings

MIDNIGHT = datetime(2026, 11, 28, tzinfo=UTC)
HOUR = timedelta(hours=1)


def view_rows(hours: range, views: int, run_id: str, bronze_version: int = 7) -> pa.Table:
    starts = [MIDNIGHT + h * HOUR for h in hours for _ in ("/a", "/b")]
    return pa.table({
        "window_start": pa.array(starts, pa.timestamp("us", tz="UTC")),
        "page": ["/a", "/b"] * len(hours),
        "views": pa.array([views] * len(starts), pa.int64()),
        "run_id": [run_id] * len(starts),
        "bronze_version": pa.array([bronze_version] * len(starts), pa.int64()),
    })


def stage(settings: Settings, hours: range, views: int, run_id: str, bronze_version: int = 7,
          interval: range | None = None) -> str:
    """Stage rows for ``hours`` as ``run_id``'s slice of ``interval`` (default: the hours)."""
    interval = interval or hours
    path = staging_path(settings, "page_traffic", run_id, MIDNIGHT + interval[0] * HOUR,
                        MIDNIGHT + (interval[-1] + 1) * HOUR)
    write_deltalake(path, view_rows(hours, views, run_id, bronze_version), mode="overwrite",
                    partition_by=["window_start"])
    return path


def served(settings: Settings) -> dict[tuple[datetime, str], tuple[int, str]]:
    path = current_table_path(settings, "page_traffic")
    if not DeltaTable.is_deltatable(path):
        return {}
    return {(r["window_start"], r["page"]): (r["views"], r["run_id"])
            for r in DeltaTable(path).to_pyarrow_table().to_pylist()}


def test_staging_paths_are_apart_per_run_and_interval_and_safe_for_object_stores(
    settings: Settings,
) -> None:
    run = "scheduled__2026-11-28T00:00:00+00:00"
    paths = {staging_path(settings, "page_traffic", r, MIDNIGHT + s * HOUR, MIDNIGHT + e * HOUR)
             for r, s, e in [(run, 0, 1), (run, 0, 2), (run + "x", 0, 1), (run, 1, 2)]}
    assert len(paths) == 4
    assert all(":" not in Path(p).name and "+" not in p for p in paths)


def test_a_staged_slice_is_served_only_once_promoted_and_replaces_its_interval_alone(
    settings: Settings,
) -> None:
    promote(settings, "page_traffic", MIDNIGHT, MIDNIGHT + 2 * HOUR,
            stage(settings, range(2), views=1, run_id="first"), 7)
    staged = stage(settings, range(1, 2), views=5, run_id="rerun")
    assert {v for v, _ in served(settings).values()} == {1}  # staged: nobody sees it
    version = DeltaTable(current_table_path(settings, "page_traffic")).version()
    assert promote(settings, "page_traffic", MIDNIGHT + HOUR, MIDNIGHT + 2 * HOUR, staged, 7) == 1
    table = DeltaTable(current_table_path(settings, "page_traffic"))
    assert table.version() == version + 1  # one commit
    expected = {(MIDNIGHT, "/a"): (1, "first"), (MIDNIGHT, "/b"): (1, "first"),
                (MIDNIGHT + HOUR, "/a"): (5, "rerun"), (MIDNIGHT + HOUR, "/b"): (5, "rerun")}
    assert served(settings) == expected
    promote(settings, "page_traffic", MIDNIGHT + HOUR, MIDNIGHT + 2 * HOUR, staged, 7)  # a retry
    assert served(settings) == expected


def test_a_slice_promoted_into_a_version_readers_do_not_use_yet_stays_unseen(
    settings: Settings,
) -> None:
    staged = stage(settings, range(1), views=3, run_id="carried")
    assert promote(settings, "page_traffic", MIDNIGHT, MIDNIGHT + HOUR, staged, 7,
                   into_version=2) == 2
    assert served(settings) == {}
    switch_version(settings, "page_traffic", 2, "reprocess")
    assert {v for v, _ in served(settings).values()} == {3}


def plan(run_id: str, start: datetime, end: datetime) -> BatchPlan:
    return BatchPlan(start, end, ["page_traffic"], False, run_id)


def written(start: datetime, end: datetime, rows: int, bronze_version: int = 7
            ) -> list[dict[str, object]]:
    """What compute reports: the version readers used when it staged (a full reprocess may
    switch them before the publish), here one that is not the one it is published into."""
    return [SliceWritten("page_traffic", start, end, rows, bronze_version, 99, 0).to_xcom()]


def test_publish_promotes_logs_then_removes_the_staging_and_a_retry_changes_nothing(
    make_settings: MakeSettings,
) -> None:
    settings = make_settings(batch={"start_date": MIDNIGHT.date()})
    staged = stage(settings, range(2), views=2, run_id="run-1")
    run = plan("run-1", MIDNIGHT, MIDNIGHT + 2 * HOUR)
    [published] = publish(settings, run, written(MIDNIGHT, MIDNIGHT + 2 * HOUR, 4))
    assert published == Published(  # what the view's asset event says (steps.announce)
        "page_traffic", MIDNIGHT, MIDNIGHT + 2 * HOUR, MIDNIGHT + 2 * HOUR, view_version=1,
        delta_version=DeltaTable(current_table_path(settings, "page_traffic")).version(),
        rows=4, restatement=False, full_reprocess=False, previous_high_water_mark=MIDNIGHT)
    assert published.describe() == (
        "page_traffic: published [2026-11-28T00:00:00Z, 2026-11-28T02:00:00Z), 4 rows, view "
        f"version 1 at Delta version {published.delta_version}; high-water mark moved from "
        "2026-11-28T00:00:00Z to 2026-11-28T02:00:00Z")
    assert {v for v, _ in served(settings).values()} == {2} and len(served(settings)) == 4
    assert not DeltaTable.is_deltatable(staged)  # removed once published
    logged = [(r["view"], r["interval_start"], r["view_version"], r["run_id"])
              for r in read_publications(settings)]
    assert logged == [("page_traffic", MIDNIGHT, 1, "run-1")]
    publish(settings, run, written(MIDNIGHT, MIDNIGHT + 2 * HOUR, 4))  # a retried publish
    assert [r["run_id"] for r in read_publications(settings)] == ["run-1"]
    assert len(served(settings)) == 4


def test_a_restatement_publishes_the_interval_again_as_a_restatement_of_a_newer_delta_version(
    make_settings: MakeSettings,
) -> None:
    settings = make_settings(batch={"start_date": MIDNIGHT.date()})
    stage(settings, range(2), views=2, run_id="run-1")
    [first] = publish(settings, plan("run-1", MIDNIGHT, MIDNIGHT + 2 * HOUR),
                      written(MIDNIGHT, MIDNIGHT + 2 * HOUR, 4))
    stage(settings, range(1, 2), views=3, run_id="restate__1", bronze_version=8,
          interval=range(1, 2))
    restating = {"page_traffic": {"rows": 1, "events": 1, "computed_from": 7}}
    [again] = publish(settings, BatchPlan(MIDNIGHT + HOUR, MIDNIGHT + 2 * HOUR, ["page_traffic"],
                                          False, "restate__1", restating),
                      written(MIDNIGHT + HOUR, MIDNIGHT + 2 * HOUR, 2, bronze_version=8))
    assert (again.start, again.end, again.high_water_mark) == (
        MIDNIGHT + HOUR, MIDNIGHT + 2 * HOUR, first.high_water_mark)  # the mark stays
    assert (again.restatement, again.full_reprocess, again.rows) == (True, False, 2)
    assert again.delta_version > first.delta_version
    assert again.delta_version == DeltaTable(current_table_path(settings, "page_traffic")).version()


def test_a_publish_retried_after_a_newer_run_published_keeps_the_newer_rows(
    make_settings: MakeSettings,
) -> None:
    """An old run staged hours 0-3 from bronze version 7 and its publish failed; a newer run
    of hours 0-2, from version 9, published (its slice has no row in hour 2). Clearing the
    old run's publish by hand then publishes only what nothing newer covers: hour 3."""
    settings = make_settings(batch={"start_date": MIDNIGHT.date()})
    old = plan("old", MIDNIGHT, MIDNIGHT + 4 * HOUR)
    stage(settings, range(4), views=1, run_id="old")
    stage(settings, range(2), views=5, run_id="new", bronze_version=9, interval=range(3))
    publish(settings, plan("new", MIDNIGHT, MIDNIGHT + 3 * HOUR),
            written(MIDNIGHT, MIDNIGHT + 3 * HOUR, 4, bronze_version=9))
    newer = served(settings)
    assert newer == {(MIDNIGHT + h * HOUR, page): (5, "new") for h in (0, 1) for page in ("/a", "/b")}
    publish(settings, old, written(MIDNIGHT, MIDNIGHT + 4 * HOUR, 8))  # cleared hours later
    assert served(settings) == newer | {
        (MIDNIGHT + 3 * HOUR, page): (1, "old") for page in ("/a", "/b")}
    assert sorted((r["run_id"], r["bronze_version"]) for r in read_publications(settings)) == [
        ("new", 9), ("old", 7)]


def test_publishing_a_slice_never_staged_fails_and_leaves_the_served_rows(
    settings: Settings,
) -> None:
    promote(settings, "page_traffic", MIDNIGHT, MIDNIGHT + HOUR,
            stage(settings, range(1), views=1, run_id="first"), 7)
    before = served(settings)
    with pytest.raises(FileNotFoundError, match="clear its compute task"):
        promote_run(settings, "lost", MIDNIGHT, MIDNIGHT + HOUR, {"page_traffic": 7})
    assert served(settings) == before and read_publications(settings) == []


def test_discarding_removes_a_staging_table_alone_and_a_missing_one_is_fine(
    settings: Settings,
) -> None:
    staged, kept = (stage(settings, range(1), views=1, run_id=run) for run in ("gone", "kept"))
    discard(staged)
    assert not Path(staged).exists() and DeltaTable.is_deltatable(kept)
    discard(staged)


def test_a_failed_run_s_staging_is_kept_for_a_while_then_removed(
    make_settings: MakeSettings,
) -> None:
    settings = make_settings(batch={"failed_staging_keep_hours": 2})
    failed = stage(settings, range(1), views=1, run_id="failed")
    assert discard_stale(settings) == []
    removed = discard_stale(settings, now=datetime.now(UTC) + timedelta(hours=3))
    assert len(removed) == 1 and not DeltaTable.is_deltatable(failed)
