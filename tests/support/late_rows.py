"""Bronze commits and published page_traffic / product_sales slices, written with delta-rs
as ingest and the batch layer write them, for tests of late rows and their restatement."""

from __future__ import annotations

from datetime import datetime, timedelta

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from lambdalake.batch.publication import Publication, publish
from lambdalake.lake.bronze import BRONZE_TABLE
from lambdalake.settings import Settings
from lambdalake.views.catalog import physical_table
from tests.support.serving_tables import MIDNIGHT, TS


def hour(h: float) -> datetime:
    return MIDNIGHT + timedelta(hours=h)


def arrive(lake: Settings, events: list[tuple[str, str, float]]) -> int:
    """(event id, type, hour) events appended to bronze in one commit; its version."""
    write_deltalake(lake.table_path(BRONZE_TABLE), pa.table({
        "event_id": [e for e, _, _ in events], "event_type": [t for _, t, _ in events],
        "occurred_at": pa.array([hour(h) for _, _, h in events], TS),
        "event_date": pa.array([hour(h).date() for _, _, h in events], pa.date32()),
    }), partition_by=["event_date"], mode="append")
    return DeltaTable(lake.table_path(BRONZE_TABLE)).version()


def publish_from(lake: Settings, bronze_version: int, *hours: int, length: int = 1) -> None:
    """The batch layer computed ``hours`` of page_traffic and product_sales from
    ``bronze_version`` (a row per hour with that lineage) and published them as intervals
    of ``length`` hours starting at each."""
    for view in ("page_traffic", "product_sales"):
        windows = [hour(h + offset) for h in hours for offset in range(length)]
        write_deltalake(lake.table_path(physical_table(view, 1)), pa.table({
            "window_start": pa.array(windows, TS),
            "bronze_version": pa.array([bronze_version] * len(windows), pa.int64()),
        }), partition_by=["window_start"], mode="overwrite",
            predicate=" OR ".join(f"window_start = '{w.isoformat()}'" for w in windows)
            if DeltaTable.is_deltatable(lake.table_path(physical_table(view, 1))) else None)
        publish(lake, [Publication(view, hour(h), hour(h + length), 1, bronze_version, "run")
                       for h in hours])
