"""Classify raw Kafka records as valid events or quarantined records, with Spark, at scale.

Every rule is derived from the event contracts (``lambdalake.contracts.registry``) and the ingest
policy in settings; nothing about an event's shape is written here. JSON is parsed once
into Spark's VARIANT type, whose ``schema_of_variant`` tells a JSON string from a number
exactly, so a wrong type is never mistaken for a value. Only ``try_`` functions are used:
under ANSI SQL a bad value must classify a record, never fail the query.

Avro travels beside JSON: a record whose first byte is 0 (which no JSON text starts with)
is Confluent-framed Avro. It is decoded with spark-avro using its writer schema (found by
the id after the magic byte among the topic's registered schemas) and read as the newest
contract of its event type, then turned into the same VARIANT, so every check after the
decoding is the one JSON gets. During a migration JSON and Avro producers share the topic.

A record gets the first reason that applies, in this order: ``empty_value``, ``oversized``,
``unknown_schema_id`` (Avro whose writer schema is not registered under the topic),
``invalid_avro`` (its body does not decode with that schema), ``invalid_utf8``,
``invalid_json`` (or not a JSON object), ``unknown_event_type``, ``wrong_type``,
``missing_required``, ``constraint_violation``, ``timestamp_out_of_range``.
``quarantine_detail`` names the fields involved.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING

from lambdalake.contracts.registry import ContractRegistry, FieldRule
from lambdalake.kafka.schema_registry import AvroSchemas
from lambdalake.settings import IngestSettings
from lambdalake.streaming.checks import (
    TIMESTAMP_FORMAT,
    any_of,
    field_stages,
    has_json_type,
    named,
    object_fields,
    violations,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

QUARANTINE_REASONS = (
    "empty_value", "oversized", "unknown_schema_id", "invalid_avro", "invalid_utf8",
    "invalid_json", "unknown_event_type", "wrong_type", "missing_required",
    "constraint_violation", "timestamp_out_of_range",
)
"""Every ``quarantine_reason``, in the order they are checked (a record gets the first)."""
NO_AVRO_SCHEMAS = AvroSchemas({}, complete=True)
"""No registered schema: Avro records are quarantined as ``unknown_schema_id``."""
def _by_rule(
    contracts: ContractRegistry, field_name: str, wanted: Callable[[FieldRule], bool]
) -> list[tuple[FieldRule, list[str]]]:
    """The event types whose contract has ``field_name`` with ``wanted`` rule, grouped by rule.

    Fields shared by every contract (the envelope) come out as one rule for all types, so
    the checks dispatch on event type only where contracts really differ.
    """
    groups: dict[str, tuple[FieldRule, list[str]]] = {}
    for event_type in contracts.event_types:
        rule = contracts.latest(event_type).fields.get(field_name)
        if rule is not None and wanted(rule):
            key = json.dumps([rule.required, rule.constraints], sort_keys=True, default=str)
            groups.setdefault(key, (rule, []))[1].append(event_type)
    return list(groups.values())


def _for_types(event_type: Column, types: list[str], all_types: list[str]) -> Column:
    from pyspark.sql import functions as F

    return F.lit(True) if types == all_types else event_type.isin(types)


def _avro_variant(schemas: AvroSchemas) -> Column:
    """The VARIANT of an Avro record's body, decoded by its writer schema id (``_schema_id``)
    and read as its reader schema; an object of nulls where the body does not decode."""
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    body = F.expr("substring(value, 6)")
    decoded: Column | None = None
    for schema_id, (writer, reader) in sorted(schemas.by_id.items()):
        value = F.to_variant_object(
            from_avro(body, writer, {"avroSchema": reader, "mode": "PERMISSIVE"}))
        condition = F.col("_schema_id") == schema_id
        decoded = F.when(condition, value) if decoded is None else decoded.when(condition, value)
    return decoded if decoded is not None else F.lit(None).cast("variant")


def _unknown_schema_id(schemas: AvroSchemas) -> Column:
    """Avro whose writer schema is not registered; when the registry did not answer, such a
    record fails the micro-batch (retried from its offsets) instead of being quarantined."""
    from pyspark.sql import functions as F

    unknown = F.col("_avro") & ~F.col("_schema_id").isin(list(schemas.by_id))
    if schemas.complete:
        return unknown
    return F.when(unknown, F.raise_error(F.concat(
        F.lit("the schema registry did not answer, and schema id "),
        F.col("_schema_id").cast("string"), F.lit(" is not known yet"))))


def classify(records: DataFrame, contracts: ContractRegistry, policy: IngestSettings,
             avro: AvroSchemas = NO_AVRO_SCHEMAS) -> DataFrame:
    """Kafka source rows -> the same rows with typed event fields and a quarantine reason.

    ``records`` has the Kafka source's columns (key, value, topic, partition, offset,
    timestamp). The result adds every contract field (typed), ``occurred_at`` as a
    timestamp, ``event_date``, ``quarantine_reason`` (null when valid) and
    ``quarantine_detail``. ``avro``: the registered schemas Avro records are decoded by.

    The work is staged in helper columns (``_o``: the object's fields, ``_t_<field>``: JSON
    type, ``_x_<field>``: typed value, ``_c_…``: check results) so each JSON lookup happens
    once and no expression grows past what Spark's code generator compiles.
    """
    from pyspark.sql import functions as F

    fields = contracts.all_fields()
    types = contracts.event_types
    # an oversized record is quarantined as such whatever it holds, so it is never parsed:
    # parsing 100 KiB records made classifying 10 % malformed traffic 19 % slower than clean
    # (nor scanned for UTF-8 validity: ``_readable`` decides both once)
    staged = records.withColumns({
        "_avro": F.expr("octet_length(value) >= 5 AND substring(value, 1, 1) = X'00'"),
        "_schema_id": F.expr("CAST(conv(hex(substring(value, 2, 4)), 16, 10) AS BIGINT)"),
    })
    staged = staged.withColumn("_readable", F.expr(
        f"octet_length(value) <= {policy.max_record_bytes} AND (_avro OR is_valid_utf8(value))"
    ))
    staged = staged.withColumn("_v", F.when(
        F.col("_readable") & F.col("_avro"), _avro_variant(avro)
    ).when(F.col("_readable"), F.expr("try_parse_json(CAST(value AS STRING))")))
    staged = staged.withColumn("_o", object_fields(F.col("_v"), list(fields)))
    staged = staged.withColumns(field_stages(fields))
    having = {n: [t for t in types if n in contracts.latest(t).fields] for n in fields}
    exact = {n: F.col(f"_d_{n}") for n, r in fields.items() if "multipleOf" in r.constraints}
    present = {n: F.col(f"_t_{n}").isNotNull() & (F.col(f"_t_{n}") != "VOID") for n in fields}
    event_type = F.col("_x_event_type")
    occurred_at = F.try_to_timestamp(F.col("_x_occurred_at"), F.lit(TIMESTAMP_FORMAT))
    staged = staged.withColumns({
        "_occurred_at": occurred_at,
        # a field of another event type's contract is an extra field here, not checked;
        # a value the column type cannot hold (an integer beyond BIGINT) is a wrong type
        **{f"_c_type_{n}": _for_types(event_type, having[n], types) & present[n] & (
            ~has_json_type(F.col(f"_t_{n}"), r.json_type) | F.col(f"_x_{n}").isNull()
        ) for n, r in fields.items()},
        **{f"_c_missing_{n}": any_of([
            _for_types(event_type, requiring, types) & ~present[n]
            for _, requiring in _by_rule(contracts, n, lambda rule: rule.required)
        ]) for n in fields},
        **{f"_c_rule_{n}": any_of([
            _for_types(event_type, having, types)
            & any_of(violations(rule, F.col(f"_x_{n}"), exact.get(n, F.lit(None))))
            for rule, having in _by_rule(contracts, n, lambda rule: bool(rule.constraints))
        ]) for n in fields},
    })
    staged = staged.withColumn(
        "_c_rule_occurred_at",
        F.col("_c_rule_occurred_at") | (present["occurred_at"] & F.col("_occurred_at").isNull()),
    )
    wrong = {n: F.col(f"_c_type_{n}") for n in fields}
    missing = {n: F.col(f"_c_missing_{n}") for n in fields}
    broken = {n: F.col(f"_c_rule_{n}") for n in fields}
    size = F.octet_length("value")
    oldest = F.col("timestamp") - F.expr(f"INTERVAL {policy.max_event_age_days} DAYS")
    newest = F.col("timestamp") + F.expr(f"INTERVAL {policy.max_future_skew_seconds} SECONDS")
    checks: list[tuple[str, Column, Column]] = [
        ("empty_value", F.col("value").isNull() | (size == 0), F.lit("")),
        ("oversized", size > policy.max_record_bytes,
         F.concat(size.cast("string"), F.lit(f" bytes > {policy.max_record_bytes}"))),
        ("unknown_schema_id", _unknown_schema_id(avro), F.col("_schema_id").cast("string")),
        # a body that does not decode reads as an object of nulls; a decoded one always has
        # its event type (a required field of every contract)
        ("invalid_avro",
         F.col("_avro") & F.expr("try_variant_get(_v, '$.event_type', 'STRING') IS NULL"),
         F.concat(F.lit("schema id "), F.col("_schema_id").cast("string"))),
        ("invalid_utf8", (size <= policy.max_record_bytes) & ~F.col("_readable"), F.lit("")),
        ("invalid_json", F.col("_o").isNull(), F.lit("")),
        ("unknown_event_type", ~F.coalesce(event_type.isin(contracts.event_types), F.lit(False)),
         F.coalesce(event_type, F.lit(""))),
        ("wrong_type", any_of(list(wrong.values())), named(wrong)),
        ("missing_required", any_of(list(missing.values())), named(missing)),
        ("constraint_violation", any_of(list(broken.values())), named(broken)),
        ("timestamp_out_of_range",
         (F.col("_occurred_at") < oldest) | (F.col("_occurred_at") > newest),
         F.concat(F.lit("kafka time "), F.col("timestamp").cast("string"))),
    ]
    if tuple(name for name, _, _ in checks) != QUARANTINE_REASONS:
        raise AssertionError("QUARANTINE_REASONS must list the checks, in order")
    staged = staged.withColumns({
        f"_r_{name}": F.coalesce(condition, F.lit(False)) for name, condition, _ in checks
    })
    reason = F.coalesce(*(F.when(F.col(f"_r_{name}"), F.lit(name)) for name, _, _ in checks))
    detail = F.coalesce(*(F.when(F.col(f"_r_{name}"), why) for name, _, why in checks))
    return staged.select(
        *records.columns,
        *(F.col(f"_x_{n}").alias(n) for n in fields if n != "occurred_at"),
        F.col("_occurred_at").alias("occurred_at"),
        F.to_date("_occurred_at").alias("event_date"),
        reason.alias("quarantine_reason"),
        F.nullif(detail, F.lit("")).alias("quarantine_detail"),
    )


def valid_only(classified: DataFrame) -> DataFrame:
    """The valid rows of ``classify``'s output, without classifying each row many times over.

    Spark pushes a filter below deterministic projections by inlining them, so a plain
    filter on ``quarantine_reason`` would carry every helper column into the condition:
    each record's JSON parsed ~130 times (measured 6.5 s instead of 1.1 s per 30,000
    records). A non-deterministic column that the filter reads keeps it above them. Since
    Spark 4.1 the optimizer avoids that itself by default
    (``spark.sql.optimizer.avoidDoubleFilterEval``); the fence keeps the classification
    single whatever that setting says.

    The fence is the partition id, not ``rand``: a streaming query gives every micro-batch
    a new seed for ``rand``, so the seed in the generated code changed with each batch and
    the whole classification stage (220 KB of Java) was compiled again every micro-batch.
    """
    from pyspark.sql import functions as F

    fenced = classified.withColumn("_fence", F.spark_partition_id())
    return fenced.where(F.col("quarantine_reason").isNull() & (F.col("_fence") >= 0)).drop("_fence")
