"""Small page_traffic tables written with delta-rs, as the batch and speed layers write
them: batch rows, real-time partials, publications (no JVM)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyarrow as pa
from deltalake import write_deltalake

from lambdalake.batch.publication import Publication, publish
from lambdalake.settings import Settings
from lambdalake.speed.realtime import realtime_table
from lambdalake.views.catalog import physical_table
from lambdalake.views.definition import load_views
from lambdalake.views.measures import sketch_of

# fixed date: tables written directly with delta-rs for settings whose batch.start_date is
# this day (never the clock's default); nothing produced through Kafka
MIDNIGHT = datetime(2026, 11, 20, tzinfo=UTC)
TS = pa.timestamp("us", tz="UTC")


def hour(h: int) -> datetime:
    return MIDNIGHT + timedelta(hours=h)


def write_batch(lake: Settings, rows: list[tuple[int, str, int]], version: int = 1) -> None:
    """page_traffic batch rows (hour, page, views), replacing the table."""
    write_deltalake(lake.table_path(physical_table("page_traffic", version)), pa.table({
        **view_columns(rows),
        "run_id": ["run"] * len(rows), "bronze_version": pa.array([3] * len(rows), pa.int64()),
        "computed_at": pa.array([MIDNIGHT] * len(rows), TS),
    }), partition_by=["window_start"], mode="overwrite")


def view_columns(rows: list[tuple[int, str, int]],
                 distinct: pa.Array | None = None) -> dict[str, pa.Array | list]:
    """page_traffic's key and measures for (hour, page, views) rows; one user and session
    each, unless ``distinct`` says otherwise."""
    distinct = distinct if distinct is not None else pa.array([1] * len(rows), pa.int64())
    return {
        "window_start": pa.array([hour(h) for h, _, _ in rows], TS),
        "window_end": pa.array([hour(h + 1) for h, _, _ in rows], TS),
        "page": [p for _, p, _ in rows],
        "views": pa.array([v for _, _, v in rows], pa.int64()),
        "unique_users": distinct,
        "unique_sessions": distinct,
    }


def append_realtime(lake: Settings, batch_id: int, rows: list[tuple[int, str, int]],
                    shard: int = 0, written_at: datetime | None = None) -> None:
    """page_traffic real-time partials (hour, page, views; the same one user and session) as
    speed shard ``shard``'s batch ``batch_id``, written at ``written_at`` (default: the
    row's hour plus ``batch_id`` minutes)."""
    one = sketch_of(["user-1"], load_views()["page_traffic"].sketch_lg_k)
    write_deltalake(lake.table_path(realtime_table("page_traffic")), pa.table({
        **view_columns(rows, pa.array([one] * len(rows), pa.binary())),
        "batch_id": pa.array([batch_id] * len(rows), pa.int64()),
        "shard": pa.array([shard] * len(rows), pa.int32()),
        "updated_at": pa.array([written_at or hour(h) + timedelta(minutes=batch_id)
                                for h, _, _ in rows], TS),
    }), partition_by=["window_start"], mode="append")


def publish_hours(lake: Settings, *hours: int) -> None:
    publish(lake, [Publication("page_traffic", hour(h), hour(h + 1), 1, 3, "run") for h in hours])
