"""Bronze as a table: batches written once (the ledger), the interval reader, compaction."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from deltalake import DeltaTable

from lambdalake.contracts.registry import ContractRegistry, encode_event
from lambdalake.lake.bronze import (
    BRONZE_TABLE,
    QUARANTINE_TABLE,
    STATS_COLUMNS,
    TABLE_PROPERTIES,
    bronze_rows,
    compact_closed_partitions,
    read_bronze_interval,
    stored_rows,
    upgrade_tables,
    with_ingest_time,
    write_micro_batch,
)
from lambdalake.lake.delta_rs import table_properties
from lambdalake.lake.ledger import BatchLedger
from lambdalake.settings import Settings
from lambdalake.streaming.classification import classify

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

# fixed date: the Kafka rows are built here with ARRIVAL as their timestamp and ingest time,
# so every age is measured against it, not the clock
ARRIVAL = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
KAFKA_SCHEMA = ("key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, "
                "timestamp TIMESTAMP, timestampType INT")


def page_view(event_id: str, occurred: datetime) -> bytes:
    return encode_event({
        "event_id": event_id, "event_type": "page_view", "user_id": "u-1", "session_id": "s-1",
        "occurred_at": occurred.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "schema_version": 1, "country": "DE", "device": "mobile", "page": "/home",
    })


def kafka_batch(spark: SparkSession, values: list[bytes | None], first_offset: int) -> DataFrame:
    rows = [(b"u-1", v, "events", 0, first_offset + i, ARRIVAL.replace(tzinfo=None), 0)
            for i, v in enumerate(values)]
    return spark.createDataFrame(rows, KAFKA_SCHEMA)


def test_a_replayed_batch_is_written_once_and_late_events_are_read(
    spark: SparkSession, settings: Settings, tmp_path: Path
) -> None:
    lake = settings.model_copy(update={"lake": settings.lake.model_copy(
        update={"root": str(tmp_path / "lake")})})
    contracts = ContractRegistry()
    on_time = ARRIVAL - timedelta(minutes=1)
    late = ARRIVAL - timedelta(hours=26)  # arrives today, belongs to the day before yesterday
    batch = classify(kafka_batch(spark, [page_view("a", on_time), page_view("b", late), b"{"], 0),
                     contracts, lake.ingest)
    # a crash between the two commits: bronze has batch 0, quarantine does not
    stamped = with_ingest_time(stored_rows(batch, contracts), ARRIVAL)
    BatchLedger("test-app").append(bronze_rows(stamped, contracts),
                                   lake.table_path(BRONZE_TABLE), "event_date", 0)
    for _ in range(2):  # the replay after a restart (a new ledger), and one more
        write_micro_batch(batch, lake, contracts, BatchLedger("test-app"), batch_id=0)
    bronze = spark.read.format("delta").load(lake.table_path(BRONZE_TABLE))
    quarantine = spark.read.format("delta").load(lake.table_path(QUARANTINE_TABLE))
    assert sorted(r.event_id for r in bronze.collect()) == ["a", "b"]
    assert [r.quarantine_reason for r in quarantine.collect()] == ["invalid_json"]

    # bronze was created by a bare append, before its declared properties; quarantine by ingest
    bronze_stats = TABLE_PROPERTIES[BRONZE_TABLE][STATS_COLUMNS]
    assert STATS_COLUMNS not in table_properties(lake.table_path(BRONZE_TABLE))
    assert (table_properties(lake.table_path(QUARANTINE_TABLE))[STATS_COLUMNS]
            == TABLE_PROPERTIES[QUARANTINE_TABLE][STATS_COLUMNS])
    assert upgrade_tables(spark, lake) == [BRONZE_TABLE]  # as ingest does when it starts
    assert table_properties(lake.table_path(BRONZE_TABLE))[STATS_COLUMNS] == bronze_stats
    assert upgrade_tables(spark, lake) == []

    hour = late.replace(minute=0, second=0, microsecond=0)
    interval = read_bronze_interval(spark, lake, hour, hour + timedelta(hours=1))
    assert [r.event_id for r in interval.collect()] == ["b"]
    # another query (a new checkpoint) writes its own batch 0
    write_micro_batch(batch, lake, contracts, BatchLedger("other-app"), batch_id=0)
    assert bronze.count() == 4
    assert quarantine.count() == 2  # the count bronze's write observed sent the row there

    ledger = BatchLedger("test-app")
    quarantined = DeltaTable(lake.table_path(QUARANTINE_TABLE)).version()
    for n in range(3):  # more small files in the late event's (closed) day
        write_micro_batch(
            classify(kafka_batch(spark, [page_view(f"late-{n}", late)], 10 + n), contracts,
                     lake.ingest),
            lake, contracts, ledger, batch_id=1 + n,
        )
    # clean batches commit nothing to quarantine
    assert DeltaTable(lake.table_path(QUARANTINE_TABLE)).version() == quarantined
    # bronze's files carry statistics of the columns readers skip by, and only those
    newest = DeltaTable(lake.table_path(BRONZE_TABLE)).version()
    log = Path(lake.table_path(BRONZE_TABLE), "_delta_log", f"{newest:020d}.json")
    added = [json.loads(line)["add"] for line in log.read_text().splitlines()
             if "add" in json.loads(line)]
    assert [sorted(json.loads(a["stats"])["minValues"]) for a in added] == [
        sorted(bronze_stats.split(","))]
    removed = compact_closed_partitions(spark, lake, before=ARRIVAL.date())
    assert removed >= 4
    assert spark.read.format("delta").load(lake.table_path(BRONZE_TABLE)).count() == 7
    # a restart after compaction: the ledger finds batch 3 behind the compaction's commit
    assert BatchLedger("test-app").committed(lake.table_path(BRONZE_TABLE), 4) == 3


def test_what_a_micro_batch_caches_is_planned_alike_at_any_time(
    spark: SparkSession, settings: Settings
) -> None:
    """The cached stage holds the classification. A streaming query's current time is a new
    literal in every micro-batch: inside that stage, it made Spark compile about 5,000 lines
    of generated Java again for each batch."""
    import time

    contracts = ContractRegistry()
    batch = classify(kafka_batch(spark, [page_view("a", ARRIVAL), b"{"], 0), contracts,
                     settings.ingest)
    plans = []
    for _ in range(2):
        plans.append(stored_rows(batch, contracts)._jdf.queryExecution().optimizedPlan())
        time.sleep(0.01)
    assert plans[0].sameResult(plans[1])
