"""What every suite shares: severities, parameters, derived columns and the helpers that
build expectations from the contracts.

Severity is GX's own ``severity`` field on each expectation. The rule:

* **critical** (blocks the DAG): anything that would make a view wrong or unreadable: the
  structure, the key, the interval, and every value constraint on a column that some view
  reads (its event time, dimensions and measured columns) or that the batch layer relies
  on (event id and type, Kafka coordinates).
* **warning** (recorded, does not block): constraints on bronze columns no view reads yet
  (``device``, ``schema_version``), a view's lineage columns, "the slice is not empty"
  when an empty slice is legitimate (a dead hour in bronze; a view hour with no events),
  the quarantine rate, and the *row-count anomaly* of bronze and batch slices: the rows are
  within a factor of what recent intervals held (parameters ``row_count_min`` and
  ``row_count_max`` from ``lambdalake.quality.baseline``; unbounded until there is a
  history). An unusual count is worth a look, not a reason to stop the data.

A dimension is checked for nulls only if every event type the view reads requires it (then
a null is a bug); a dimension that some of those types lack is null for their events by
design, so it gets no null check.

Each expectation's ``meta`` holds ``check`` (a stable name, e.g. ``not_null:page``, used in
reports and history) and ``rule`` (why it exists, in words). The interval is not baked into
the suites: expectations refer to the suite parameters ``interval_start`` and
``interval_end`` (``interval_parameters(start, end)``), so one suite validates any slice.

Two rules are checked on *derived columns*, SQL expressions listed in the suite's
``meta["derived_columns"]`` that the gate adds to the slice before validating: "a field
that only some event types require is present on their rows" (``_missing_<field>``: the
type and id of each event without it, expected null) and "the window is one grain long and
aligned" (``_window``: each wrong window, expected null). A row condition or a SQL check
would be a metric domain of its own, i.e. more Spark jobs; a derived column is checked in
the same single aggregation as every other column-map expectation, and its unexpected
values name the offending events or windows. ``_window`` is written in SQL that DuckDB
runs too (with ``DUCKDB_MACROS``), so the real-time gate, which validates without Spark,
computes the same column from the same definition. A derived column's name starts with
``_`` (``new_suite`` refuses another): that is how Data Docs tell the gate's checks from the
table's columns.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from decimal import Decimal
from typing import Any

import great_expectations as gx  # the package's __init__ silenced GX analytics first
from great_expectations.expectations.expectation import Expectation
from great_expectations.expectations.metadata_types import FailureSeverity

from lambdalake.contracts.registry import ContractRegistry, FieldRule

CRITICAL = FailureSeverity.CRITICAL
WARNING = FailureSeverity.WARNING
INTERVAL_START = "interval_start"
INTERVAL_END = "interval_end"
ROW_COUNT_MIN = "row_count_min"
ROW_COUNT_MAX = "row_count_max"
QUARANTINE_MAX_ROWS = "quarantine_max_rows"
ORPHAN_MAX_SHARE = "orphan_max_share"
KAFKA_COORDINATES = ("topic", "partition", "offset")
DERIVED_COLUMNS = "derived_columns"
"""Suite ``meta`` key: {column: Spark SQL expression}, added to the slice by the gate."""
DUCKDB_MACROS = (
    "CREATE OR REPLACE MACRO unix_timestamp(ts) AS epoch_us(ts) // 1000000",
)
"""What DuckDB needs to run the derived columns of ``view_suite`` and ``realtime_suite``
(they are written in the SQL both engines share; Spark's ``unix_timestamp`` is not DuckDB's)."""


def interval_parameters(
    start: datetime, end: datetime, row_count: tuple[int | None, int | None] = (None, None),
    quarantine_max_rows: int | None = None, orphan_max_share: float | None = None,
) -> dict[str, Any]:
    """The suite parameters of a slice [start, end): its bounds, the rows it usually holds
    (``lambdalake.quality.baseline``), for quarantine the most rows that stay under the
    quarantine rate, and for a view with joins the largest share of orphans (None: no
    bound)."""
    return {INTERVAL_START: start, INTERVAL_END: end, ROW_COUNT_MIN: row_count[0],
            ROW_COUNT_MAX: row_count[1], QUARANTINE_MAX_ROWS: quarantine_max_rows,
            ORPHAN_MAX_SHARE: orphan_max_share}


def check_name(expectation: Expectation) -> str:
    """The stable name of an expectation of these suites (``meta['check']``)."""
    return str((expectation.meta or {}).get("check", expectation.expectation_type))


def is_derived(column: str) -> bool:
    """Is ``column`` one the gate derives (``_window``, ``_orphan_share``), not one of the
    table? Reports show derived columns as checks of their own, never as table columns."""
    return column.startswith("_")


def derived_columns(suite: gx.ExpectationSuite) -> dict[str, str]:
    """Columns (name: Spark SQL expression) the gate adds to a slice before validating it."""
    return dict((suite.meta or {}).get(DERIVED_COLUMNS) or {})


def expect_on(
    kind: type[Expectation], check: str, rule: str, severity: FailureSeverity, *,
    about: str | None = None, **kwargs: Any,
) -> Expectation:
    """An expectation with its severity and, in ``meta``, its check name, rule and (for a
    derived column) the column it is ``about``."""
    meta = {"check": check, "rule": rule, **({"column": about} if about else {})}
    return kind(severity=severity, meta=meta, **kwargs)


def _number(value: Any) -> int | float:
    """A contract bound (exact ``Decimal`` from the JSON file) as a plain JSON number."""
    value = Decimal(str(value))
    return int(value) if value == value.to_integral_value() else float(value)


def loosest_bounds_of(rules: list[FieldRule]) -> tuple[int | float | None, int | float | None]:
    """The bounds every one of ``rules`` satisfies (None: some rule has no such bound)."""
    if not rules:
        return None, None
    minima = [r.constraints.get("minimum") for r in rules]
    maxima = [r.constraints.get("maximum") for r in rules]
    lower = None if any(m is None for m in minima) else _number(min(map(Decimal, map(str, minima))))
    upper = None if any(m is None for m in maxima) else _number(max(map(Decimal, map(str, maxima))))
    return lower, upper


def enum_values_of(rules: list[FieldRule]) -> list[Any] | None:
    """Every value the enums of ``rules`` allow (None: some rule has no enum)."""
    if not rules or any("enum" not in r.constraints for r in rules):
        return None
    return sorted({value for r in rules for value in r.constraints["enum"]})


def field_rules(contracts: ContractRegistry, event_types: Iterable[str],
                name: str) -> list[FieldRule]:
    """The rules of field ``name`` in the newest contract of each type that has it."""
    found = (contracts.latest(t).fields.get(name) for t in event_types)
    return [rule for rule in found if rule is not None]


def new_suite(
    name: str, expectations: list[Expectation], derived: dict[str, str] | None = None
) -> gx.ExpectationSuite:
    """A suite of exactly ``expectations`` (GX logs and drops invalid ones; we refuse), and
    of ``derived`` columns whose names say so (``is_derived``)."""
    checks = [check_name(e) for e in expectations]
    duplicates = sorted({c for c in checks if checks.count(c) > 1})
    if duplicates:
        raise ValueError(f"suite {name}: duplicate checks {duplicates}")
    misnamed = sorted(column for column in derived or {} if not is_derived(column))
    if misnamed:
        raise ValueError(f"suite {name}: derived columns {misnamed} must start with '_' "
                         "(reports tell them from the table's columns by it)")
    suite = gx.ExpectationSuite(name=name, expectations=expectations,
                                meta={DERIVED_COLUMNS: dict(derived or {})})
    if len(suite.expectations) != len(expectations):
        raise ValueError(f"suite {name}: GX refused {len(expectations) - len(suite.expectations)}"
                         " expectations")
    return suite


def not_empty_check(subject: str, require_rows: bool) -> Expectation:
    if require_rows:
        rule = f"the {subject} slice has rows (it must, for this interval)"
    else:
        rule = f"the {subject} slice has rows (an empty one is legitimate: recorded only)"
    return expect_on(gx.expectations.ExpectTableRowCountToBeBetween, "not_empty", rule,
                   CRITICAL if require_rows else WARNING, min_value=1)


def usual_row_count_check(subject: str) -> Expectation:
    return expect_on(gx.expectations.ExpectTableRowCountToBeBetween, "row_count:usual",
                   f"the {subject} slice holds about as many rows as recent intervals did "
                   "(their median per hour, scaled, within a factor; recorded only)", WARNING,
                   min_value={"$PARAMETER": ROW_COUNT_MIN},
                   max_value={"$PARAMETER": ROW_COUNT_MAX})
