"""The forever store: bronze (valid events, append-only) and quarantine (everything else).

Both are Delta tables written by the ingest stream, one micro-batch at a time, through the
query's ``BatchLedger`` (``lambdalake.lake.ledger``): each commit records its batch, so a
micro-batch replayed after a crash is skipped by the table that already committed it and
written by the one that did not: every Kafka record lands exactly once in exactly one of
the two tables.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING

from lambdalake.contracts.registry import ContractRegistry
from lambdalake.lake.checkpoints import CHECKPOINT_INTERVAL, NO_CHECKPOINT_IN_COMMIT
from lambdalake.lake.delta_rs import TimeSlice, count_slice, read_small_slice, table_exists
from lambdalake.lake.ledger import BatchLedger
from lambdalake.lake.sql import delta_path, upgrade_properties
from lambdalake.settings import Settings
from lambdalake.timeutil import as_utc

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame, SparkSession

BRONZE_TABLE = "bronze_events"
QUARANTINE_TABLE = "quarantine_events"
QUARANTINE_COLUMNS = [
    "topic", "partition", "offset", "kafka_timestamp", "key", "raw_value",
    "quarantine_reason", "quarantine_detail", "ingested_at", "ingest_date",
]

STATS_COLUMNS = "delta.dataSkippingStatsColumns"
TABLE_PROPERTIES = {
    # Delta keeps min/max statistics of a table's first 32 columns for every file it writes:
    # 6 of the 14 us a record took to write bronze. Its readers skip files by event time
    # (intervals, the late-data log) and Kafka time (arrival slices) only. Their
    # checkpoints are written beside ingest's micro-batches (``CHECKPOINT_EVERY``), never
    # inside a commit
    BRONZE_TABLE: {STATS_COLUMNS: "occurred_at,kafka_timestamp,ingested_at",
                   CHECKPOINT_INTERVAL: NO_CHECKPOINT_IN_COMMIT},
    QUARANTINE_TABLE: {STATS_COLUMNS: "kafka_timestamp,ingested_at",
                       CHECKPOINT_INTERVAL: NO_CHECKPOINT_IN_COMMIT},
}
"""Properties of bronze and quarantine: set by the first write, or by ``upgrade_tables``."""

CHECKPOINT_EVERY = 100
"""Commits between two checkpoints of bronze or quarantine (ingest's ``CheckpointWriter``):
a reader replays at most this many small commit files after the newest checkpoint."""

UNIQUE_COLUMNS = ("raw_value", "event_id", "offset")
"""Bronze's and quarantine's columns with a value per record (a replayed duplicate aside)."""

FILE_WRITE_CONF = {
    # Parquet's dictionary encoding was half of bronze's write (a profile of ingest's
    # executor threads). Timestamps are stored as INT64 microseconds (exactly what Spark
    # holds), not Spark's default INT96, whose 12-byte values the dictionary hashes as byte
    # arrays; Spark, delta-rs and pyarrow read both kinds, also side by side in one table
    # (a bronze written before this setting). Columns unique per record skip the
    # dictionary, which Parquet fills until it is too large and then drops for plain
    # values. Whole ingest micro-batches gained less than the run-to-run noise of a shared
    # two-core machine (2026-11-28)
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    **{f"parquet.enable.dictionary#{column}": "false" for column in UNIQUE_COLUMNS},
}
"""How bronze's and quarantine's Parquet files are written, by ingest's appends and by
maintenance's ``OPTIMIZE`` alike: a session's settings (``get_spark`` hands the Hadoop one,
Parquet's, to a driver as ``spark.hadoop.<key>``)."""


def upgrade_tables(spark: SparkSession, settings: Settings) -> list[str]:
    """Give bronze and quarantine the ``TABLE_PROPERTIES`` they lack: an existing table
    keeps the properties of its first write, so a changed declaration reaches it here;
    return the tables changed. Ingest does it when it starts, before it writes."""
    return [name for name, properties in TABLE_PROPERTIES.items()
            if upgrade_properties(spark, settings.table_path(name), properties)]


def bronze_columns(contracts: ContractRegistry) -> list[str]:
    """Bronze's columns: every contract field, then where and when the record came from."""
    return [*contracts.all_fields(), "event_date", "topic", "partition", "offset",
            "kafka_timestamp", "key", "raw_value", "ingested_at"]


INGEST_TIME_COLUMNS = ("ingested_at", "ingest_date")


def stored_rows(classified: DataFrame, contracts: ContractRegistry) -> DataFrame:
    """The columns bronze and quarantine store, but the ingest time: what a micro-batch caches.

    Kafka's ``value`` and ``timestamp`` become ``raw_value`` and ``kafka_timestamp``,
    renamed, not copied: the raw bytes are most of a micro-batch's cached size (a 100 KiB
    malformed record is kept whole in quarantine)."""
    stored = dict.fromkeys([*bronze_columns(contracts), "quarantine_reason", *QUARANTINE_COLUMNS])
    return classified.withColumnsRenamed(
        {"timestamp": "kafka_timestamp", "value": "raw_value"}
    ).select(*(column for column in stored if column not in INGEST_TIME_COLUMNS))


def with_ingest_time(rows: DataFrame, ingested_at: datetime) -> DataFrame:
    """``ingested_at`` and its UTC date ``ingest_date``: one time per micro-batch."""
    from pyspark.sql import functions as F

    ingested_at = ingested_at.astimezone(UTC)
    return rows.withColumns({"ingested_at": F.lit(ingested_at),
                             "ingest_date": F.lit(ingested_at.date())})


def bronze_rows(rows: DataFrame, contracts: ContractRegistry) -> DataFrame:
    return rows.where("quarantine_reason IS NULL").select(*bronze_columns(contracts))


def quarantine_rows(rows: DataFrame) -> DataFrame:
    return rows.where("quarantine_reason IS NOT NULL").select(*QUARANTINE_COLUMNS)


@dataclass(frozen=True)
class QuarantineListener:
    """Who hears, per written micro-batch, how many records each of ``reasons`` quarantined
    (ingest's metrics): counted by the same observation bronze's write completes."""

    reasons: tuple[str, ...]
    heard: Callable[[dict[str, int]], None]


def write_micro_batch(
    classified: DataFrame, settings: Settings, contracts: ContractRegistry, ledger: BatchLedger,
    batch_id: int, listener: QuarantineListener | None = None,
) -> None:
    """Append one classified micro-batch to bronze and quarantine, each once.

    The batch is cached once, with only the columns the two tables store, so classification
    runs once and each record's bytes are held once. The ingest time is added after the
    cache: a streaming query's ``current_timestamp()`` is a new literal in every micro-batch,
    and inside the classification stage it made Spark generate and compile that stage's
    code (about 5,000 lines of Java) again for every batch, which then ran before the JIT
    had warmed up to it. Bronze gets a commit for every batch (the ledger's record of where
    ingest is); quarantine only for a batch that quarantined something, which bronze's
    write counts as it goes (an ``Observation``: a Spark job less per batch than asking the
    cached batch, 0.07 s of a 5,000-record batch's 1 s)."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    rows = stored_rows(classified, contracts).persist()
    try:
        stamped = with_ingest_time(rows, datetime.now(UTC))
        quarantined = Observation()
        # Spark completes an Observation with the first query that runs it: bronze's write
        # must be the only action on ``counted``, or the count would be another query's
        reason = F.col("quarantine_reason")
        counted = stamped.observe(
            quarantined, F.count_if(reason.isNotNull()).alias("rows"),
            *(F.count_if(reason == name).alias(f"reason:{name}")
              for name in (listener.reasons if listener else ())))
        wrote_bronze = ledger.append(
            bronze_rows(counted, contracts), settings.table_path(BRONZE_TABLE), "event_date",
            batch_id, properties=TABLE_PROPERTIES[BRONZE_TABLE])
        ledger.append(quarantine_rows(stamped), settings.table_path(QUARANTINE_TABLE),
                      "ingest_date", batch_id, every_batch=False,
                      rows=quarantined.get.get("rows") if wrote_bronze else None,
                      properties=TABLE_PROPERTIES[QUARANTINE_TABLE])
        if listener is not None and wrote_bronze:  # a batch written before counted then
            counts = quarantined.get
            listener.heard({name: int(counts.get(f"reason:{name}") or 0)
                            for name in listener.reasons})
    finally:
        rows.unpersist()


def read_bronze_interval(
    spark: SparkSession, settings: Settings, start: datetime, end: datetime,
    version: int | None = None,
) -> DataFrame:
    """Bronze rows whose event time is in [start, end), however late they arrived.

    ``version`` pins the table version read (reproducible recomputation). The event-date
    partition filter lets Delta skip every other day's files.
    """
    from pyspark.sql import functions as F

    start, end = as_utc(start), as_utc(end)  # event_date is the UTC date
    first_day: date = start.date()
    last_day: date = end.date()
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    return (
        reader.load(settings.table_path(BRONZE_TABLE))
        .where(F.col("event_date").between(F.lit(first_day), F.lit(last_day)))
        .where((F.col("occurred_at") >= F.lit(start)) & (F.col("occurred_at") < F.lit(end)))
    )


def read_bronze_rows(
    settings: Settings, start: datetime, end: datetime, max_rows: int, *,
    version: int | None = None, columns: list[str] | None = None,
) -> pa.Table | None:
    """``read_bronze_interval``'s rows, read with delta-rs in this process, or None if there
    are more than ``max_rows`` (``read_small_slice``). ``columns`` default: all but the
    record's key and bytes, which no check reads."""
    start, end = as_utc(start), as_utc(end)
    return read_small_slice(
        settings.table_path(BRONZE_TABLE),
        TimeSlice("occurred_at", start, end, partitions=(
            ("event_date", ">=", start.date()), ("event_date", "<=", end.date()))),
        max_rows, version=version, columns=columns,
        without=() if columns else ("key", "raw_value"))


def compact_closed_partitions(spark: SparkSession, settings: Settings, before: date) -> int:
    """OPTIMIZE bronze's partitions older than ``before``; return how many files it removed.

    Compaction only rewrites existing files of closed days; the stream's blind appends
    (even late events into those days) never conflict with it. ``spark`` writes the files
    as ingest does if it has ``FILE_WRITE_CONF`` (``spark_jobs/compact_bronze.py``'s has).
    """
    table = delta_path(settings.table_path(BRONZE_TABLE))
    metrics = spark.sql(f"OPTIMIZE {table} WHERE event_date < '{before.isoformat()}'")
    row = metrics.select("metrics.numFilesRemoved").collect()
    return int(row[0][0]) if row else 0


def _arrived_in(start: datetime, end: datetime) -> Column:
    """Records that reached Kafka in [start, end) (Kafka's timestamp is the arrival time)."""
    from pyspark.sql import functions as F

    start, end = as_utc(start), as_utc(end)
    return (F.col("kafka_timestamp") >= F.lit(start)) & (F.col("kafka_timestamp") < F.lit(end))


def read_quarantine_arrivals(
    spark: SparkSession, settings: Settings, start: datetime, end: datetime,
) -> DataFrame:
    """Quarantined records that reached Kafka in [start, end), however late ingest took them
    (a record is ingested at or after its arrival: older ingest dates are skipped)."""
    from pyspark.sql import functions as F

    return (spark.read.format("delta").load(settings.table_path(QUARANTINE_TABLE))
            .where(F.col("ingest_date") >= F.lit(start.astimezone(UTC).date()))
            .where(_arrived_in(start, end)))


def read_quarantine_rows(
    settings: Settings, start: datetime, end: datetime, max_rows: int,
) -> pa.Table | None:
    """``read_quarantine_arrivals``' rows, read with delta-rs in this process, or None if
    there are more than ``max_rows`` (``read_small_slice``). Ingest creates the table with
    the first record it quarantines: until then every slice is empty."""
    start, end = as_utc(start), as_utc(end)
    path = settings.table_path(QUARANTINE_TABLE)
    if not table_exists(path):
        return _no_quarantined_records()
    return read_small_slice(
        path, TimeSlice("kafka_timestamp", start, end,
                        partitions=(("ingest_date", ">=", start.date()),)),
        max_rows)


def count_bronze_arrivals(settings: Settings, start: datetime, end: datetime) -> int:
    """How many valid records reached Kafka in [start, end), counted with delta-rs in this
    process. Ingest refuses event times more than ``max_event_age_days`` before or
    ``max_future_skew_seconds`` after arrival, so only those event dates are read, and the
    files' Kafka-time statistics skip most of them."""
    policy = settings.ingest
    start, end = as_utc(start), as_utc(end)
    oldest = (start - timedelta(days=policy.max_event_age_days)).date()
    newest = (end + timedelta(seconds=policy.max_future_skew_seconds)).date()
    return count_slice(
        settings.table_path(BRONZE_TABLE),
        TimeSlice("kafka_timestamp", start, end, partitions=(
            ("event_date", ">=", oldest), ("event_date", "<=", newest))))


def _no_quarantined_records() -> pa.Table:
    """A slice of no quarantined records, with ``QUARANTINE_COLUMNS`` as ingest writes them."""
    import pyarrow as pa

    moment = pa.timestamp("us", tz="UTC")
    return pa.schema([
        ("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()),
        ("kafka_timestamp", moment), ("key", pa.binary()), ("raw_value", pa.binary()),
        ("quarantine_reason", pa.string()), ("quarantine_detail", pa.string()),
        ("ingested_at", moment), ("ingest_date", pa.date32()),
    ]).empty_table()
