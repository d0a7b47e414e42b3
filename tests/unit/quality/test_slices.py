"""Slices a gate reads without Spark, where no Spark is needed to know they are empty."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import write_deltalake

from lambdalake.lake.bronze import BRONZE_TABLE, QUARANTINE_COLUMNS, read_quarantine_rows
from lambdalake.quality.slices import validate_quarantine_slice
from tests.support.settings_factory import MakeSettings

HOUR = datetime(2026, 11, 20, 10, tzinfo=UTC)


def test_before_ingest_quarantined_anything_the_quarantine_gate_passes_an_empty_slice(
    tmp_path: Path, make_settings: MakeSettings,
) -> None:
    """Ingest creates the quarantine table with its first refused record: clean traffic
    leaves none, and its gate must pass rather than fail on a missing table."""
    settings = make_settings(lake={"root": str(tmp_path / "lake")})
    write_deltalake(settings.table_path(BRONZE_TABLE), pa.table({
        "event_date": pa.array([HOUR.date()], pa.date32()),
        "kafka_timestamp": pa.array([HOUR], pa.timestamp("us", tz="UTC"))}),
        partition_by=["event_date"])
    rows = read_quarantine_rows(settings, HOUR, HOUR + timedelta(hours=1), max_rows=100)
    assert rows is not None and rows.num_rows == 0 and rows.column_names == QUARANTINE_COLUMNS
    no_spark: Any = None  # an empty local slice never reaches Spark
    result = validate_quarantine_slice(no_spark, settings, HOUR, HOUR + timedelta(hours=1))
    assert result.success and result.rows == 0 and result.evaluated > 0, result.report()
