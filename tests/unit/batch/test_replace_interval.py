"""Replacing a view table's interval with delta-rs, when runs whose intervals overlap write
at the same moment (no Spark)."""

from __future__ import annotations

import functools
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable

from lambdalake.batch.staging import replace_interval
from lambdalake.lake.commits import retry_on_conflict

MIDNIGHT = datetime(2026, 11, 28, tzinfo=UTC)
PAGES = ("/a", "/b", "/c")


def slice_rows(hours: range) -> pa.Table:
    return pa.table({
        "window_start": pa.array([MIDNIGHT + timedelta(hours=h) for h in hours for _ in PAGES],
                                 pa.timestamp("us", tz="UTC")),
        "page": [page for _ in hours for page in PAGES],
        "views": pa.array([1] * (len(hours) * len(PAGES)), pa.int64()),
    })


def test_overlapping_runs_writing_a_new_table_at_once_leave_each_row_once(
    tmp_path: Path,
) -> None:
    """A run over three hours and a run over the last of them write a table that does not
    exist yet, released together: whichever commits last, every (window, page) is there
    once. Before the table was created on its own, most rounds kept both runs' last hour."""
    for round_ in range(20):
        path = str(tmp_path / f"view_{round_}")
        released = threading.Barrier(2)

        def write(hours: range, path: str = path, released: threading.Barrier = released
                  ) -> None:
            released.wait()
            retry_on_conflict(functools.partial(
                replace_interval, slice_rows(hours), path, MIDNIGHT + timedelta(hours=hours[0]),
                MIDNIGHT + timedelta(hours=hours[-1] + 1)))

        runs = [threading.Thread(target=write, args=(hours,)) for hours in (range(3), range(2, 3))]
        for run in runs:
            run.start()
        for run in runs:
            run.join()
        keys = DeltaTable(path).to_pyarrow_table(columns=["window_start", "page"]).to_pylist()
        assert len(keys) == 3 * len(PAGES) == len({tuple(k.values()) for k in keys}), round_
