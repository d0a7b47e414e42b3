"""The reference stream: the entities' compacted topics -> the lake's changelog, exactly once.

A second query of the ingest application reads every entity's topic (``<reference
topic>.<entity>``), classifies each record against its entity's newest contract, appends
the micro-batch to ``reference_changes`` and ``reference_quarantine`` (idempotent per
batch, as bronze is), then rebuilds the history and current state of the entities that
changed (``lambdalake.lake.reference``). Reference data changes seldom, so the query runs
on a slower trigger than the events' and costs nothing between changes.

A record with a null value is a deletion of its key, valid from the time in its
``updated_at`` header (or, without one, its Kafka timestamp). Otherwise a record is quarantined with
the first reason that applies, in ``REFERENCE_QUARANTINE_REASONS``' order:
``missing_key``, ``empty_value``, ``oversized``, ``invalid_utf8``, ``invalid_json`` (or
not a JSON object), ``wrong_type``, ``missing_required``, ``constraint_violation``
(``updated_at`` that is not a UTC millisecond time included), ``key_mismatch`` (the Kafka
key is not the value's key field: compaction would keep the wrong record).
"""

from __future__ import annotations

import logging
import os
from functools import reduce
from typing import TYPE_CHECKING

from lambdalake.contracts.registry import (
    DELETION_TIME_HEADER,
    ENTITY_TIME_FIELD,
    EntityContract,
    EntityRegistry,
)
from lambdalake.lake.reference import refresh, write_changes
from lambdalake.settings import IngestSettings, Settings
from lambdalake.streaming.checks import (
    TIMESTAMP_FORMAT,
    any_of,
    field_stages,
    has_json_type,
    named,
    object_fields,
    violations,
)
from lambdalake.streaming.runner import query_ledger

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

QUERY_NAME = "reference"
REFERENCE_QUARANTINE_REASONS = (
    "missing_key", "empty_value", "oversized", "invalid_utf8", "invalid_json", "wrong_type",
    "missing_required", "constraint_violation", "key_mismatch",
)

log = logging.getLogger(__name__)


def classify_changes(records: DataFrame, contract: EntityContract,
                     policy: IngestSettings) -> DataFrame:
    """Kafka rows of one entity's topic -> changelog rows with a quarantine reason.

    The result has ``entity``, ``entity_key``, ``deleted``, ``valid_from``, the contract's
    fields (typed; ``updated_at`` a timestamp), the Kafka source columns (``raw_value``,
    ``kafka_timestamp``), ``quarantine_reason`` (null when valid) and ``quarantine_detail``.
    ``records`` come from a Kafka source read with ``includeHeaders``.
    """
    from pyspark.sql import functions as F

    fields = contract.fields
    staged = records.withColumns({
        "_tombstone": F.col("value").isNull(),
        "_readable": F.expr(
            f"octet_length(value) <= {policy.max_record_bytes} AND is_valid_utf8(value)"),
    })
    staged = staged.withColumn("_v", F.when(
        F.col("_readable"), F.expr("try_parse_json(CAST(value AS STRING))")))
    staged = staged.withColumn("_o", object_fields(F.col("_v"), list(fields)))
    staged = staged.withColumns(field_stages(fields))
    present = {n: F.col(f"_t_{n}").isNotNull() & (F.col(f"_t_{n}") != "VOID") for n in fields}
    updated_at = F.try_to_timestamp(F.col(f"_x_{ENTITY_TIME_FIELD}"), F.lit(TIMESTAMP_FORMAT))
    wrong = {n: present[n] & (~has_json_type(F.col(f"_t_{n}"), r.json_type)
                              | F.col(f"_x_{n}").isNull()) for n, r in fields.items()}
    missing = {n: ~present[n] for n, r in fields.items() if r.required}
    broken = {n: any_of(violations(r, F.col(f"_x_{n}"), F.col(f"_d_{n}")
                                   if "multipleOf" in r.constraints else F.lit(None)))
              for n, r in fields.items() if r.constraints}
    broken[ENTITY_TIME_FIELD] = broken.get(ENTITY_TIME_FIELD, F.lit(False)) | (
        present[ENTITY_TIME_FIELD] & updated_at.isNull())
    deleted_at = F.try_to_timestamp(F.expr(
        f"CAST(try_element_at(filter(headers, h -> h.key = '{DELETION_TIME_HEADER}'), 1).value"
        " AS STRING)"), F.lit(TIMESTAMP_FORMAT))
    key = F.col("key").cast("string")
    size = F.octet_length("value")
    checks: list[tuple[str, Column, Column]] = [
        ("missing_key", F.col("key").isNull(), F.lit("")),
        ("empty_value", size == 0, F.lit("")),
        ("oversized", size > policy.max_record_bytes,
         F.concat(size.cast("string"), F.lit(f" bytes > {policy.max_record_bytes}"))),
        ("invalid_utf8", ~F.col("_readable") & (size <= policy.max_record_bytes), F.lit("")),
        ("invalid_json", F.col("_o").isNull(), F.lit("")),
        ("wrong_type", any_of(list(wrong.values())), named(wrong)),
        ("missing_required", any_of(list(missing.values())), named(missing)),
        ("constraint_violation", any_of(list(broken.values())), named(broken)),
        ("key_mismatch", ~key.eqNullSafe(F.col(f"_x_{contract.key}")),
         F.concat(F.lit(f"{contract.key} "), F.coalesce(F.col(f"_x_{contract.key}"), F.lit("")))),
    ]
    if tuple(name for name, _, _ in checks) != REFERENCE_QUARANTINE_REASONS:
        raise AssertionError("REFERENCE_QUARANTINE_REASONS must list the checks, in order")
    # a deletion has only its key to check
    applies = {name: (F.lit(True) if name == "missing_key" else ~F.col("_tombstone"))
               for name, _, _ in checks}
    staged = staged.withColumns({
        f"_r_{name}": F.coalesce(applies[name] & condition, F.lit(False))
        for name, condition, _ in checks
    })
    reason = F.coalesce(*(F.when(F.col(f"_r_{name}"), F.lit(name)) for name, _, _ in checks))
    detail = F.coalesce(*(F.when(F.col(f"_r_{name}"), why) for name, _, why in checks))
    typed = {n: F.col(f"_x_{n}") for n in fields}
    typed[ENTITY_TIME_FIELD] = updated_at
    typed[contract.key] = F.when(F.col("_tombstone"), key).otherwise(typed[contract.key])
    typed["entity"] = F.lit(contract.entity)  # also for deletions
    return staged.select(
        key.alias("entity_key"),
        F.col("_tombstone").alias("deleted"),
        F.when(F.col("_tombstone"), F.coalesce(deleted_at, F.col("timestamp")))
        .otherwise(updated_at).alias("valid_from"),
        *(column.alias(n) for n, column in typed.items()),
        "topic", "partition", "offset", "key",
        F.col("timestamp").alias("kafka_timestamp"), F.col("value").alias("raw_value"),
        reason.alias("quarantine_reason"),
        F.nullif(detail, F.lit("")).alias("quarantine_detail"),
    )


def classify_topics(records: DataFrame, entities: EntityRegistry, settings: Settings
                    ) -> DataFrame:
    """Rows of every entity's topic, each classified by its own entity's contract."""
    per_entity = [
        classify_changes(records.where(records.topic == settings.kafka.entity_topic(e).name),
                         entities.latest(e), settings.ingest)
        for e in entities.entities
    ]
    return reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), per_entity)


def start_reference_ingest(spark: SparkSession, settings: Settings) -> StreamingQuery:
    entities = EntityRegistry()
    topics = ",".join(settings.kafka.entity_topic(e).name for e in entities.entities)
    ledger = query_ledger(spark, QUERY_NAME)

    def write(batch: DataFrame, batch_id: int) -> None:
        changed = write_changes(classify_topics(batch, entities, settings), settings, entities,
                                ledger(), batch_id)
        refresh(batch.sparkSession, settings, changed)

    log.info("reference: reading %s, pid %d", topics, os.getpid())
    return (
        spark.readStream.format("kafka")
        .options(**settings.kafka.spark_options())
        .option("subscribe", topics)
        .option("includeHeaders", "true")
        .option("startingOffsets", "earliest")
        # the log cleaner leaves gaps between a compacted topic's offsets by design, and these
        # topics are kept forever, so a gap is compaction, never retention's data loss
        .option("failOnDataLoss", "false")
        .option("maxOffsetsPerTrigger", settings.ingest.max_offsets_per_trigger)
        .load()
        .writeStream.queryName(QUERY_NAME)
        .foreachBatch(write)
        .option("checkpointLocation", settings.checkpoint_path(QUERY_NAME))
        .trigger(processingTime=settings.ingest.reference_trigger_interval)
        .start()
    )
