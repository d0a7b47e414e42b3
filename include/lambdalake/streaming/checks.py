"""Spark column checks of one contract field, shared by the event and the reference-entity
classifiers: is a VARIANT value of the field's JSON type, and which of the field's
constraints does a typed value break. Everything null-safe and flat, so it classifies a
record instead of failing the query under ANSI SQL."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from lambdalake.contracts.registry import FieldRule

if TYPE_CHECKING:
    from pyspark.sql import Column

TIMESTAMP_FORMAT = "yyyy-MM-dd'T'HH:mm:ss.SSSX"
"""The contracts' date-time (UTC, milliseconds), as Spark parses it."""
_INTEGER_TYPES = ["TINYINT", "SMALLINT", "INT", "BIGINT"]
# constraints not checked per field: event_type's const is the dispatch itself, and
# schema_version's const would refuse newer compatible versions (forward compatibility)
_SKIPPED_CONSTRAINTS = {"event_type": {"const"}, "schema_version": {"const"}}


def any_of(conditions: list[Column]) -> Column:
    """True where any condition is true; nulls count as false (a flat expression)."""
    from pyspark.sql import functions as F

    if not conditions:
        return F.lit(False)
    if len(conditions) == 1:
        return F.coalesce(conditions[0], F.lit(False))
    return F.coalesce(F.greatest(*conditions), F.lit(False))


def named(conditions: dict[str, Column]) -> Column:
    """Comma-separated names of the conditions that hold (for quarantine_detail)."""
    from pyspark.sql import functions as F

    return F.concat_ws(",", *(F.when(c, F.lit(name)) for name, c in conditions.items()))


def object_fields(variant: Column, names: list[str]) -> Column:
    """The fields ``names`` of a VARIANT JSON object as a struct of VARIANT values, read in
    one pass over the object; null where the value is not an object (an array, a scalar,
    JSON null).

    One pass matters: looking each field up on its own (``variant_get(v, '$.name')``) walks
    the object's keys again per field, and took twice as long for the contracts' 13 fields
    as the struct and the per-field reads of it together.
    """
    from pyspark.sql import functions as F

    members = ", ".join(f"`{name}`: VARIANT" for name in names)
    return F.try_variant_get(variant, "$", f"STRUCT<{members}>")


def field_stages(fields: Mapping[str, FieldRule], record: str = "_o") -> dict[str, Column]:
    """Helper columns of each field of ``record`` (an ``object_fields`` struct): ``_t_<name>``
    its VARIANT type (``schema_of_variant``: STRING, BIGINT, DECIMAL(p,s), VOID for JSON
    null; null when absent), ``_x_<name>`` its value as the contract's column type (null
    where it does not fit), and ``_d_<name>`` the exact decimal a ``multipleOf`` compares."""
    from pyspark.sql import functions as F

    value = {name: F.col(record).getField(name) for name in fields}
    return {
        **{f"_t_{n}": F.schema_of_variant(value[n]) for n in fields},
        **{f"_x_{n}": value[n].try_cast(rule.spark_type) for n, rule in fields.items()},
        **{f"_d_{n}": value[n].try_cast("DECIMAL(38,18)")
           for n, rule in fields.items() if "multipleOf" in rule.constraints},
    }


def has_json_type(variant_type: Column, json_type: str) -> Column:
    """Whether a value whose VARIANT type is ``variant_type`` is of JSON Schema ``json_type``."""
    if json_type == "string":
        return variant_type == "STRING"
    if json_type == "boolean":
        return variant_type == "BOOLEAN"
    if json_type == "integer":
        return variant_type.isin(_INTEGER_TYPES) | (
            variant_type.startswith("DECIMAL(") & variant_type.endswith(",0)")
        )
    return variant_type.isin([*_INTEGER_TYPES, "FLOAT", "DOUBLE"]) | variant_type.startswith(
        "DECIMAL("
    )


def violations(rule: FieldRule, value: Column, exact: Column) -> list[Column]:
    """Conditions under which a present, well-typed ``value`` breaks ``rule``'s constraints."""
    from pyspark.sql import functions as F

    checks: list[Column] = []
    skipped = _SKIPPED_CONSTRAINTS.get(rule.name, set())
    for keyword, bound in rule.constraints.items():
        if keyword in skipped:
            continue
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
            checks.append((exact % F.lit(bound).cast("DECIMAL(38,18)")) != 0)
    return checks
