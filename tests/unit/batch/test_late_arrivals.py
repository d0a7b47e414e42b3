"""Rows that reached bronze after their window was published, found from bronze's Delta log
(tables written with delta-rs: no JVM)."""

from __future__ import annotations

import json
import time
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from lambdalake.batch.late_arrivals import LateArrivals, WaitingWindow
from lambdalake.batch.publication import Publication, publish, read_publications
from lambdalake.batch.restatement import plan_restatements
from lambdalake.lake.bronze import BRONZE_TABLE
from lambdalake.lake.bronze_log import files_added
from lambdalake.settings import Settings
from lambdalake.views.catalog import physical_table
from lambdalake.views.definition import ViewDefinition
from tests.support.late_rows import arrive, hour, publish_from
from tests.support.serving_tables import TS


def waiting(lake: Settings, views: list[ViewDefinition]) -> dict[str, list[WaitingWindow]]:
    return {w.view: w.windows for w in LateArrivals(lake, views).waiting()}


def test_late_rows_wait_per_window_until_their_window_is_recomputed(
    lake: Settings, views: list[ViewDefinition],
) -> None:
    first = arrive(lake, [("a", "page_view", 0.5), ("b", "page_view", 1.5)])
    publish_from(lake, first, 0, 1, 2)
    assert waiting(lake, views) == {"page_traffic": [], "product_sales": []}

    late = arrive(lake, [("c", "page_view", 1.2), ("c", "page_view", 1.2),  # a duplicate
                         ("d", "page_view", 1.7), ("e", "purchase", 1.9),
                         ("f", "page_view", 5.5)])  # hour 5 is not published: not late
    assert waiting(lake, views) == {
        "page_traffic": [WaitingWindow(hour(1), rows=3, events=2, computed_from=first)],
        "product_sales": [WaitingWindow(hour(1), rows=1, events=1, computed_from=first)]}
    assert waiting(lake, views)["page_traffic"][0].rows == 3  # a second look: the same

    publish_from(lake, late, 1)  # the restated hour reads the newer bronze
    assert waiting(lake, views) == {"page_traffic": [], "product_sales": []}


def test_commits_made_while_a_run_ran_are_late_for_what_it_publishes(
    lake: Settings, views: list[ViewDefinition],
) -> None:
    pinned = arrive(lake, [("a", "page_view", 3.1)])  # the run reads this version ...
    arrive(lake, [("b", "page_view", 3.4)])          # ... while this arrives
    assert waiting(lake, views)["page_traffic"] == []  # hour 3 is not published yet
    publish_from(lake, pinned, 3)
    (window,) = waiting(lake, views)["page_traffic"]
    assert (window.window_start, window.rows, window.computed_from) == (hour(3), 1, pinned)


def test_a_look_reads_only_the_commits_since_the_last_and_the_late_files(
    lake: Settings, views: list[ViewDefinition], monkeypatch: pytest.MonkeyPatch,
) -> None:
    first = arrive(lake, [("a", "page_view", 0.5)])
    publish_from(lake, first, 0, 1)
    for number in range(20):  # on-time traffic: hour 6, unpublished
        arrive(lake, [(f"x{number}", "page_view", 6.2)])
    arrive(lake, [("late", "page_view", 0.9)])
    LateArrivals(lake, views).waiting()
    state = json.loads((lake.state_dir / "status" / "late-arrivals.json").read_text())
    assert state["scanned_through"] == 21 and len(state["late"]) == 1

    read: list[tuple[int, int]] = []
    import lambdalake.batch.late_arrivals as module

    def counting(table: str, after: int, through: int, known_by: object = None) -> list:
        read.append((after, through))
        return files_added(table, after, through, known_by)  # type: ignore[arg-type]

    monkeypatch.setattr(module, "files_added", counting)
    arrive(lake, [("y", "page_view", 6.3)])
    assert waiting(lake, views)["page_traffic"][0].rows == 1
    assert read == [(21, 22)]  # one new commit read, not bronze's 23


def test_every_api_worker_answers_from_the_newest_look_of_any_process(
    lake: Settings, views: list[ViewDefinition],
) -> None:
    """Two workers of the query API (two instances: nothing in memory is shared) must not
    contradict each other after a restatement, whichever of them looked last."""
    first_worker, second_worker = LateArrivals(lake, views), LateArrivals(lake, views)
    first = arrive(lake, [("a", "page_view", 0.5)])
    publish_from(lake, first, 0)
    late = arrive(lake, [("b", "page_view", 0.7), ("c", "purchase", 0.8)])
    before = {"page_traffic": 1, "product_sales": 1}

    def rows(worker: LateArrivals, max_age_seconds: float) -> dict[str, int]:
        return {w.view: w.rows for w in worker.recent(max_age_seconds)}

    assert rows(first_worker, 30) == before
    publish_from(lake, late, 0)  # restated
    assert rows(second_worker, 30) == before  # the first worker's look is recent enough
    assert rows(second_worker, 0) == {"page_traffic": 0, "product_sales": 0}  # looks again
    assert rows(first_worker, 30) == {"page_traffic": 0, "product_sales": 0}  # its look too
    LateArrivals(lake, views[:1]).waiting()  # a look of one view: the other's stays as it was
    assert rows(first_worker, 30) == {"page_traffic": 0, "product_sales": 0}


def test_a_compaction_adds_no_late_rows(lake: Settings, views: list[ViewDefinition]) -> None:
    first = arrive(lake, [("a", "page_view", 0.5)])
    arrive(lake, [("b", "page_view", 0.6)])
    publish_from(lake, DeltaTable(lake.table_path(BRONZE_TABLE)).version(), 0)
    DeltaTable(lake.table_path(BRONZE_TABLE)).optimize.compact()  # rewrites both files
    assert first < DeltaTable(lake.table_path(BRONZE_TABLE)).version()
    assert waiting(lake, views)["page_traffic"] == []


def test_nothing_waits_before_bronze_exists(lake: Settings, views: list[ViewDefinition]) -> None:
    assert waiting(lake, views) == {"page_traffic": [], "product_sales": []}


def test_lineage_is_read_from_the_rows_when_the_view_table_has_no_statistics(
    lake: Settings, views: list[ViewDefinition],
) -> None:
    from lambdalake.batch.late_arrivals import published_from

    first = arrive(lake, [("a", "page_view", 0.5)])
    later = arrive(lake, [("b", "page_view", 0.7)])
    write_deltalake(lake.table_path(physical_table("page_traffic", 1)), pa.table({
        "window_start": pa.array([hour(0)], TS),
        "bronze_version": pa.array([later], pa.int64()),
    }), partition_by=["window_start"], configuration={"delta.dataSkippingNumIndexedCols": "0"})
    publish(lake, [Publication("page_traffic", hour(0), hour(1), 1, first, "run")])
    files = DeltaTable(lake.table_path(physical_table("page_traffic", 1))).get_add_actions(
        flatten=True)
    assert "min.bronze_version" not in pa.table(files).column_names
    assert published_from(lake, views[0]) == {hour(0): later}


def test_a_lake_older_than_its_log_retention_is_looked_at_without_the_lost_commits(
    lake: Settings, views: list[ViewDefinition],
) -> None:
    """Delta removes commit files older than its log retention at a checkpoint: a first look
    (no state file) finds the files those commits added among the table's live files, and
    counts the late ones; a window published after them is not disturbed."""
    first = arrive(lake, [("a", "page_view", 0.5), ("b", "page_view", 2.5)])
    publish_from(lake, first, 0)
    late = arrive(lake, [("c", "page_view", 0.7)])  # late for hour 0, lost from the log
    arrive(lake, [("d", "page_view", 3.5)])
    publish_from(lake, arrive(lake, [("e", "page_view", 4.5)]), 2, 4)
    bronze = DeltaTable(lake.table_path(BRONZE_TABLE))
    bronze.create_checkpoint()
    log = f"{lake.table_path(BRONZE_TABLE)}/_delta_log"
    for version in range(late + 1):  # what log retention removes
        Path(f"{log}/{version:020d}.json").unlink()
    found = waiting(lake, views)["page_traffic"]
    # "a" counts too: its commit left the log, so it is dated as late as it can be, and hour
    # 0 is restated once for nothing; "b" is not late for hour 2, published after it
    assert [(w.window_start, w.rows, w.events) for w in found] == [(hour(0), 2, 2)]
    publish_from(lake, bronze.version(), 0)
    assert waiting(lake, views)["page_traffic"] == []


def test_commits_that_leave_the_log_after_a_look_do_not_restate_what_it_read(
    lake: Settings, views: list[ViewDefinition], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A reader that falls behind log retention stands in only files written after its
    previous look for the lost commits: the files that look read are not late again."""
    from lambdalake.batch import late_arrivals

    monkeypatch.setattr(late_arrivals, "WRITE_TO_COMMIT", timedelta(0))
    first = arrive(lake, [("a", "page_view", 0.5), ("b", "page_view", 1.5)])
    publish_from(lake, first, 0, 1)
    assert waiting(lake, views)["page_traffic"] == []
    time.sleep(0.01)  # the files below are written after that look
    arrive(lake, [("c", "page_view", 3.5)])  # on time: hour 3 is not published
    kept = arrive(lake, [("d", "page_view", 4.5)])
    DeltaTable(lake.table_path(BRONZE_TABLE)).create_checkpoint()
    log = f"{lake.table_path(BRONZE_TABLE)}/_delta_log"
    for version in range(kept):  # every commit but the newest leaves the log
        Path(f"{log}/{version:020d}.json").unlink()
    assert waiting(lake, views)["page_traffic"] == []


def test_a_late_row_waits_in_every_hopping_window_it_is_in_and_counts_once(
    lake: Settings, views: list[ViewDefinition],
) -> None:
    rolling = ViewDefinition.model_validate({
        "name": "rolling", "description": "page views, an hour every 30 minutes",
        "event_types": ["page_view"], "grain": "1 hour", "slide": "30 minutes",
        "lateness": "10 minutes", "dimensions": [], "measures": [{"name": "n", "kind": "count"}]})
    first = arrive(lake, [("a", "page_view", 0.5)])
    windows = [hour(h / 2) for h in range(4)]  # 0:00, 0:30, 1:00, 1:30 of interval [0, 2)
    write_deltalake(lake.table_path(physical_table("rolling", 1)), pa.table({
        "window_start": pa.array(windows, TS),
        "bronze_version": pa.array([first] * len(windows), pa.int64()),
    }), partition_by=["window_start"])
    publish(lake, [Publication("rolling", hour(0), hour(2), 1, first, "run")])
    arrive(lake, [("b", "page_view", 1.2)])  # in the windows from 0:30 and 1:00
    [answer] = LateArrivals(lake, [rolling]).waiting()
    assert answer.windows == [  # missing from both, the newest's own
        WaitingWindow(hour(0.5), rows=1, events=1, computed_from=first, own=(0, 0)),
        WaitingWindow(hour(1), rows=1, events=1, computed_from=first, own=(1, 1))]
    assert (answer.rows, answer.events) == (1, 1), "one late row, not one per window"
    assert LateArrivals(lake, [rolling]).last_answer() == {"rolling": answer}
    [restatement] = plan_restatements([answer], read_publications(lake), [], 5)
    assert (restatement.start, restatement.end) == (hour(0), hour(2))
    assert restatement.views["rolling"].rows == 1
