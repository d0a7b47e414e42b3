"""Classify raw Kafka records as valid events or quarantined records, with Spark, at scale.

Every rule is derived from the event contracts (``lambdalake.contracts``) and the ingest
policy in settings; nothing about an event's shape is written here. JSON is parsed once
into Spark's VARIANT type, whose ``schema_of_variant`` tells a JSON string from a number
exactly, so a wrong type is never mistaken for a value. Only ``try_`` functions are used:
under ANSI SQL a bad value must classify a record, never fail the query.

A record gets the first reason that applies, in this order: ``empty_value``, ``oversized``,
``invalid_utf8``, ``invalid_json`` (or not a JSON object), ``unknown_event_type``,
``wrong_type``, ``missing_required``, ``constraint_violation``, ``timestamp_out_of_range``.
``quarantine_detail`` names the fields involved.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from lambdalake.contracts import ContractRegistry, FieldRule
from lambdalake.settings import IngestSettings

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

TIMESTAMP_FORMAT = "yyyy-MM-dd'T'HH:mm:ss.SSSX"
REASONS = (
    "empty_value", "oversized", "invalid_utf8", "invalid_json", "unknown_event_type",
    "wrong_type", "missing_required", "constraint_violation", "timestamp_out_of_range",
)
_VARIANT_TYPES = {
    "string": r"^STRING$",
    "integer": r"^(TINYINT|SMALLINT|INT|BIGINT|DECIMAL\(\d+,0\))$",
    "number": r"^(TINYINT|SMALLINT|INT|BIGINT|DECIMAL\(\d+,\d+\)|FLOAT|DOUBLE)$",
    "boolean": r"^BOOLEAN$",
}
# dispatch fields: checked by the event-type lookup and forward-compatible versioning
_NOT_CONSTRAINED = {"event_type", "schema_version"}


@dataclass(frozen=True)
class _Fields:
    """Column expressions for one field, over the parsed VARIANT column ``v``."""

    rule: FieldRule

    def variant_type(self) -> Column:
        from pyspark.sql import functions as F

        return F.expr(f"schema_of_variant(variant_get(v, '$.{self.rule.name}'))")

    def present(self) -> Column:
        json_type = self.variant_type()
        return json_type.isNotNull() & (json_type != "VOID")

    def wrong_type(self) -> Column:
        return self.present() & ~self.variant_type().rlike(_VARIANT_TYPES[self.rule.json_type])

    def typed(self) -> Column:
        from pyspark.sql import functions as F

        return F.expr(f"try_variant_get(v, '$.{self.rule.name}', '{self.rule.spark_type}')")

    def violates(self) -> Column:
        """True where the (present, well-typed) value breaks one of its constraints."""
        from pyspark.sql import functions as F

        value = self.typed()
        checks: list[Column] = []
        for keyword, bound in self.rule.constraints.items():
            if keyword == "const":
                checks.append(value != F.lit(bound))
            elif keyword == "enum":
                checks.append(~value.isin(list(bound)))
            elif keyword == "minimum":
                checks.append(value < F.lit(bound))
            elif keyword == "maximum":
                checks.append(value > F.lit(bound))
            elif keyword == "minLength":
                checks.append(F.char_length(value) < int(bound))
            elif keyword == "maxLength":
                checks.append(F.char_length(value) > int(bound))
            elif keyword == "pattern":
                checks.append(~value.rlike(str(bound)))
            elif keyword == "multipleOf":
                exact = F.expr(f"try_variant_get(v, '$.{self.rule.name}', 'DECIMAL(38,10)')")
                checks.append((exact % F.lit(bound).cast("DECIMAL(38,10)")) != 0)
        return _any(checks)


def _any(conditions: list[Column]) -> Column:
    from pyspark.sql import functions as F

    result = F.lit(False)
    for condition in conditions:
        result = result | F.coalesce(condition, F.lit(False))
    return result


def _named(conditions: dict[str, Column]) -> Column:
    """Comma-separated names of the conditions that hold (for quarantine_detail)."""
    from pyspark.sql import functions as F

    return F.concat_ws(",", *(F.when(c, F.lit(name)) for name, c in conditions.items()))


def classify(records: DataFrame, contracts: ContractRegistry, policy: IngestSettings) -> DataFrame:
    """Kafka source rows -> the same rows with typed event fields and a quarantine reason.

    ``records`` has the Kafka source's columns (key, value, topic, partition, offset,
    timestamp). The result adds every contract field (typed), ``occurred_at`` as a
    timestamp, ``event_date``, ``quarantine_reason`` (null when valid) and
    ``quarantine_detail``.
    """
    from pyspark.sql import functions as F

    all_fields = {name: _Fields(rule) for name, rule in contracts.all_fields().items()}
    parsed = records.withColumn(
        "v", F.expr("CASE WHEN is_valid_utf8(value) THEN try_parse_json(CAST(value AS STRING)) END")
    )
    event_type = all_fields["event_type"].typed()
    per_type = {name: contracts.latest(name) for name in contracts.event_types}
    wrong_types = {name: f.wrong_type() for name, f in all_fields.items()}
    missing = {
        name: _any([
            (event_type == t) & ~all_fields[name].present()
            for t, contract in per_type.items()
            if name in contract.fields and contract.fields[name].required
        ])
        for name in all_fields
    }
    violations = {
        name: _any([
            (event_type == t) & _Fields(contract.fields[name]).violates()
            for t, contract in per_type.items() if name in contract.fields
        ])
        for name in all_fields if name not in _NOT_CONSTRAINED
    }
    occurred_at = F.try_to_timestamp(all_fields["occurred_at"].typed(), F.lit(TIMESTAMP_FORMAT))
    violations["occurred_at"] = violations.get("occurred_at", F.lit(False)) | (
        all_fields["occurred_at"].present() & occurred_at.isNull()
    )
    oldest = F.col("timestamp") - F.expr(f"INTERVAL {policy.max_event_age_days} DAYS")
    newest = F.col("timestamp") + F.expr(f"INTERVAL {policy.max_future_skew_seconds} SECONDS")
    size = F.octet_length("value")
    checks: list[tuple[str, Column, Column]] = [
        ("empty_value", F.col("value").isNull() | (size == 0), F.lit(None)),
        ("oversized", size > policy.max_record_bytes,
         F.concat(size.cast("string"), F.lit(f" bytes > {policy.max_record_bytes}"))),
        ("invalid_utf8", ~F.expr("is_valid_utf8(value)"), F.lit(None)),
        ("invalid_json", F.col("v").isNull()
         | ~F.expr("schema_of_variant(v)").startswith("OBJECT"), F.lit(None)),
        ("unknown_event_type", ~F.coalesce(event_type.isin(contracts.event_types), F.lit(False)),
         event_type),
        ("wrong_type", _any(list(wrong_types.values())), _named(wrong_types)),
        ("missing_required", _any(list(missing.values())), _named(missing)),
        ("constraint_violation", _any(list(violations.values())), _named(violations)),
        ("timestamp_out_of_range", (occurred_at < oldest) | (occurred_at > newest),
         F.col("timestamp").cast("string")),
    ]
    reason: Column = F.lit(None).cast("string")
    detail: Column = F.lit(None).cast("string")
    for name, condition, why in reversed(checks):
        reason = F.when(F.coalesce(condition, F.lit(False)), F.lit(name)).otherwise(reason)
        detail = F.when(F.coalesce(condition, F.lit(False)), why.cast("string")).otherwise(detail)
    typed = [f.typed().alias(name) for name, f in all_fields.items() if name != "occurred_at"]
    return parsed.select(
        "*", *typed, occurred_at.alias("occurred_at"),
        F.to_date(occurred_at).alias("event_date"),
        reason.alias("quarantine_reason"), detail.alias("quarantine_detail"),
    ).drop("v")
