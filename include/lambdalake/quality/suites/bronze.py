"""``bronze_suite`` (one slice of ``bronze_events``, rows whose event time is in [start, end)):
    the columns readers rely on exist; every field a contract requires is not null (for the
    event types that require it); Kafka coordinates (topic, partition, offset) are unique;
    ``event_type`` is a known type; ``occurred_at`` is in [start, end); enums (currency,
    device) hold their contract's values; numbers stay within the contract's minimum and
    maximum (amounts and quantities are non-negative).
"""

from __future__ import annotations

from collections.abc import Iterable

import great_expectations as gx  # the package's __init__ silenced GX analytics first
from great_expectations.expectations.expectation import Expectation
from great_expectations.expectations.metadata_types import FailureSeverity

from lambdalake.contracts.registry import ContractRegistry
from lambdalake.lake.bronze import (
    BRONZE_TABLE,
    bronze_columns,
)
from lambdalake.quality.suites.common import (
    CRITICAL,
    INTERVAL_END,
    INTERVAL_START,
    KAFKA_COORDINATES,
    WARNING,
    enum_values_of,
    expect_on,
    field_rules,
    loosest_bounds_of,
    new_suite,
    not_empty_check,
    usual_row_count_check,
)
from lambdalake.quality.suites.view import missing_field
from lambdalake.views.definition import ViewDefinition, load_views

BATCH_KEY = ("event_id", "event_type", "occurred_at")
"""What the batch layer itself reads from every bronze row (dedup, filter, window)."""
PROVENANCE = ("event_date", "topic", "partition", "offset", "kafka_timestamp", "ingested_at")
"""Bronze's provenance columns the suite expects; ``key`` and ``raw_value`` (the record's
bytes, kept for forensics and replay) are read by no layer and not validated."""
BRONZE_SUITE = BRONZE_TABLE


def columns_read_by_views(views: Iterable[ViewDefinition]) -> set[str]:
    """Bronze columns some view reads: event time, join keys, dimensions, measured columns."""
    columns: set[str] = set()
    for view in views:
        columns |= set(view.event_columns)
    return columns


def bronze_suite(
    contracts: ContractRegistry | None = None,
    views: dict[str, ViewDefinition] | None = None,
    *,
    require_rows: bool = False,
) -> gx.ExpectationSuite:
    """The suite of a bronze slice (see the module docstring); ``views`` set severities."""
    contracts = contracts or ContractRegistry()
    views = load_views(contracts=contracts) if views is None else views
    critical_columns = {*BATCH_KEY, *KAFKA_COORDINATES} | columns_read_by_views(views.values())

    def severity(column: str) -> FailureSeverity:
        return CRITICAL if column in critical_columns else WARNING

    types = contracts.event_types
    fields = contracts.all_fields()
    required_anywhere = {
        name for name in fields if any(r.required for r in field_rules(contracts, types, name))
    }
    expected_columns = [c for c in bronze_columns(contracts)
                        if c in required_anywhere or c in PROVENANCE]

    expectations: list[Expectation] = []
    derived: dict[str, str] = {}
    add = expectations.append
    add(not_empty_check("bronze", require_rows))
    add(usual_row_count_check("bronze"))
    add(expect_on(gx.expectations.ExpectTableColumnsToMatchSet, "columns",
                "bronze has every column a contract requires and the provenance the batch "
                "layer reads (Kafka coordinates and time, event date, ingest time)",
                CRITICAL, column_set=expected_columns, exact_match=False))
    for column in KAFKA_COORDINATES:
        add(expect_on(gx.expectations.ExpectColumnValuesToNotBeNull, f"not_null:{column}",
                    "every bronze row has its Kafka coordinates", CRITICAL, column=column))
    add(expect_on(gx.expectations.ExpectCompoundColumnsToBeUnique,
                "unique:" + ",".join(KAFKA_COORDINATES),
                "a Kafka record lands in bronze exactly once (idempotent micro-batches)",
                CRITICAL, column_list=list(KAFKA_COORDINATES)))
    for name in fields:
        requiring = [t for t in types
                     if any(r.required for r in field_rules(contracts, [t], name))]
        if not requiring:
            continue
        if len(requiring) == len(types):
            add(expect_on(gx.expectations.ExpectColumnValuesToNotBeNull, f"not_null:{name}",
                        f"every contract requires {name}", severity(name), column=name))
        else:  # a derived column, not a row condition: one aggregation for every check
            missing = f"_missing_{name}"
            derived[missing] = missing_field(name, requiring)
            add(expect_on(gx.expectations.ExpectColumnValuesToBeNull,
                        f"not_null:{name}[{','.join(requiring)}]",
                        f"the {', '.join(requiring)} contracts require {name} "
                        f"({missing} names each event without it)",
                        severity(name), about=name, column=missing))
    add(expect_on(gx.expectations.ExpectColumnValuesToBeInSet, "in_set:event_type",
                "event_type is a type with a contract", CRITICAL,
                column="event_type", value_set=types))
    add(expect_on(gx.expectations.ExpectColumnValuesToBeBetween, "in_interval:occurred_at",
                "the slice holds events whose event time is in [start, end)", CRITICAL,
                column="occurred_at", min_value={"$PARAMETER": INTERVAL_START},
                max_value={"$PARAMETER": INTERVAL_END}, strict_max=True))
    for name in fields:
        if name == "event_type":
            continue
        rules = field_rules(contracts, types, name)
        allowed = enum_values_of(rules)
        if allowed is not None:
            add(expect_on(gx.expectations.ExpectColumnValuesToBeInSet, f"in_set:{name}",
                        f"{name} is one of the contract's values", severity(name),
                        column=name, value_set=allowed))
        if rules and all(r.json_type in ("integer", "number") for r in rules):
            lower, upper = loosest_bounds_of(rules)
            if lower is not None or upper is not None:
                add(expect_on(gx.expectations.ExpectColumnValuesToBeBetween, f"range:{name}",
                            f"{name} is within the contract's bounds [{lower}, {upper}]",
                            severity(name), column=name, min_value=lower, max_value=upper))
    return new_suite(BRONZE_SUITE, expectations, derived)
