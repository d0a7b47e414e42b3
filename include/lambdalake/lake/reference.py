"""Reference data in the lake: each entity's changelog, its history and its current state.

``reference_changes`` is the forever store of the entities' compacted topics: every change
ever read, valid or a deletion, written once per Kafka record (the same idempotent
micro-batch appends as bronze), partitioned by entity, never compacted. Bad records go to
``reference_quarantine`` with their reason. Kafka's log cleaner may drop a key's older
values from the topic; the changelog keeps them, so the history below can always be
rebuilt.

From the changelog, two tables follow as a pure function of it (``history``):

* ``reference_history``: SCD type 2, one row per version of a key with
  ``[valid_from, valid_to)``; a deletion closes the key's last version; ``valid_to`` is
  null while a version is current.
* ``reference_current``: the versions whose ``valid_to`` is null, one row per live key.

Validity follows the change's own clock, ``updated_at`` (for a deletion, which has no
value, the record header of that name, else its Kafka timestamp), not when Kafka or the
lake received it: the same clock as the events' ``occurred_at``, so a
point-in-time join gives every event the version valid when it happened, however late
either arrived, and replaying the topic gives the same history. Changes of one key are
ordered by that time, then by their Kafka offset; a version superseded at the very
instant it began (a change sent twice) was never valid and is left out.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from lambdalake.contracts.registry import EntityRegistry
from lambdalake.lake.bronze import QUARANTINE_COLUMNS, with_ingest_time
from lambdalake.lake.delta_rs import Partition, delta_rs_uri, read_small_slice, table_exists
from lambdalake.lake.ledger import BatchLedger
from lambdalake.settings import Settings

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

CHANGES_TABLE = "reference_changes"
QUARANTINE_TABLE = "reference_quarantine"
HISTORY_TABLE = "reference_history"
CURRENT_TABLE = "reference_current"
KEY_COLUMNS = ("entity", "entity_key")
SOURCE_COLUMNS = ("topic", "partition", "offset", "kafka_timestamp", "raw_value")


def entity_fields(entities: EntityRegistry) -> list[str]:
    """Every field of every entity contract, in a stable order (newest definition wins)."""
    fields: dict[str, None] = {}
    for key in sorted(entities.contracts):
        fields.update(dict.fromkeys(entities.contracts[key].fields))
    return list(fields)


def change_columns(entities: EntityRegistry) -> list[str]:
    """The changelog's columns: which key, whether deleted, valid from when, the fields,
    then where and when the record came from."""
    return list(dict.fromkeys([*KEY_COLUMNS, "deleted", "valid_from", *entity_fields(entities),
                               *SOURCE_COLUMNS, "ingested_at"]))


def write_changes(classified: DataFrame, settings: Settings, entities: EntityRegistry,
                  ledger: BatchLedger, batch_id: int) -> list[str]:
    """Append one classified micro-batch to the changelog and the quarantine, idempotently;
    return the entities it changed (their history and current state are then stale)."""
    from pyspark.sql import functions as F

    rows = classified.persist()
    try:
        stamped = with_ingest_time(rows, datetime.now(UTC))
        valid = stamped.where("quarantine_reason IS NULL")
        ledger.append(valid.select(*change_columns(entities)),
                      settings.table_path(CHANGES_TABLE), "entity", batch_id)
        ledger.append(stamped.where("quarantine_reason IS NOT NULL").select(*QUARANTINE_COLUMNS),
                      settings.table_path(QUARANTINE_TABLE), "ingest_date", batch_id,
                      every_batch=False)
        changed = valid.select("entity").distinct().orderBy("entity")
        return [row.entity for row in changed.where(F.col("entity").isNotNull()).collect()]
    finally:
        rows.unpersist()


def history(changes: DataFrame) -> DataFrame:
    """SCD type 2 versions of the keys in ``changes`` (changelog rows of one or more
    entities): the changelog's columns but its source ones, with ``valid_to`` and a
    1-based ``version`` per key."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    in_time = Window.partitionBy(*KEY_COLUMNS).orderBy("valid_from", "partition", "offset")
    timed = changes.withColumn("valid_to", F.lead("valid_from").over(in_time))
    versions = timed.where(~F.col("deleted")).where(
        F.col("valid_to").isNull() | (F.col("valid_to") > F.col("valid_from")))
    numbered = versions.withColumn("version", F.row_number().over(
        Window.partitionBy(*KEY_COLUMNS).orderBy("valid_from", "partition", "offset")))
    return numbered.drop(*SOURCE_COLUMNS, "deleted", "ingested_at")


def refresh(spark: SparkSession, settings: Settings, changed: list[str]) -> None:
    """Rebuild the history and the current state of the ``changed`` entities from the
    changelog. Each table's partition of an entity is replaced in one commit, so a reader
    sees the old or the new state, and a repeat after a crash writes the same rows."""
    from pyspark.sql import functions as F

    changes = spark.read.format("delta").load(settings.table_path(CHANGES_TABLE))
    for entity in changed:
        versions = history(changes.where(F.col("entity") == entity)).persist()
        try:
            only_this = f"entity = '{entity}'"
            _replace(versions, settings.table_path(HISTORY_TABLE), only_this)
            _replace(versions.where(F.col("valid_to").isNull()).drop("valid_to"),
                     settings.table_path(CURRENT_TABLE), only_this)
        finally:
            versions.unpersist()


def _replace(frame: DataFrame, path: str, where: str) -> None:
    (frame.write.format("delta").mode("overwrite").option("replaceWhere", where)
     .option("mergeSchema", "true").partitionBy("entity").save(path))


def read_versions(spark: SparkSession, settings: Settings, entity: str,
                  attributes: list[str]) -> DataFrame:
    """The history of ``entity``'s keys for a point-in-time join: ``entity_key``,
    ``valid_from``, ``valid_to`` and ``attributes`` (no rows before any change arrived)."""
    from pyspark.sql import functions as F

    path = settings.table_path(HISTORY_TABLE)
    if not table_exists(path):
        schema = ", ".join(["entity_key STRING", "valid_from TIMESTAMP", "valid_to TIMESTAMP",
                            *(f"{name} STRING" for name in attributes)])
        return spark.createDataFrame([], schema)
    return (spark.read.format("delta").load(path).where(F.col("entity") == entity)
            .select("entity_key", "valid_from", "valid_to", *attributes))


def read_history(spark: SparkSession, settings: Settings, entity: str) -> DataFrame | None:
    """Every version of ``entity``'s keys, all columns; None before any change arrived."""
    from pyspark.sql import functions as F

    path = settings.table_path(HISTORY_TABLE)
    if not table_exists(path):
        return None
    return spark.read.format("delta").load(path).where(F.col("entity") == entity)


def read_history_rows(settings: Settings, entity: str, max_rows: int) -> pa.Table | None:
    """``read_history``'s rows of an existing history, read with delta-rs in this process,
    or None if there are more than ``max_rows`` (``read_small_slice``)."""
    return read_small_slice(settings.table_path(HISTORY_TABLE), Partition("entity", entity),
                            max_rows)


def versions_changing_after(settings: Settings, entity: str, attributes: list[str],
                            moment: datetime) -> list[dict[str, Any]]:
    """Without a JVM: every version (``entity_key``, ``valid_from``, ``valid_to`` and
    ``attributes``) of each of ``entity``'s keys that began or ended after ``moment``,
    from the last one valid at it on."""
    from deltalake import DeltaTable

    path = settings.table_path(HISTORY_TABLE)
    if not table_exists(path):
        return []
    rows = DeltaTable(delta_rs_uri(path)).to_pyarrow_table(
        columns=["entity_key", "valid_from", "valid_to", *attributes],
        partitions=[("entity", "=", entity)]).to_pylist()
    live = [row for row in rows if row["valid_to"] is None or row["valid_to"] > moment]
    changing = {row["entity_key"] for row in live
                if row["valid_from"] > moment or row["valid_to"] is not None}
    return [row for row in live if row["entity_key"] in changing]
