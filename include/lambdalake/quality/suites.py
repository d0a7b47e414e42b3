"""Expectation suites as code, generated from the event contracts and the view definitions.

Nothing here is written per view or per event type: a new view, a new event type or a new
constraint in a contract changes the suites by itself. Five suites exist:

``bronze_suite`` (one slice of ``bronze_events``, rows whose event time is in [start, end)):
    the columns readers rely on exist; every field a contract requires is not null (for the
    event types that require it); Kafka coordinates (topic, partition, offset) are unique;
    ``event_type`` is a known type; ``occurred_at`` is in [start, end); enums (currency,
    device) hold their contract's values; numbers stay within the contract's minimum and
    maximum (amounts and quantities are non-negative).

``quarantine_suite`` (rows of ``quarantine_events`` whose Kafka time is in [start, end):
    a malformed record may have no event time, so the slice is by arrival): the columns
    exist, the Kafka coordinates and the reason are not null, the coordinates are unique (a
    record is quarantined once), the reason is one ingest gives (``QUARANTINE_REASONS``),
    the Kafka time is in [start, end); and, as a warning, the *quarantine rate*: at most
    ``quality.quarantine_max_rate`` of the records that arrived in the interval (parameter
    ``quarantine_max_rows``, ``quarantine_max_rows(arrived, rate)``).

``view_suite`` (one slice of a batch view, rows whose ``window_start`` is in [start, end)):
    the view's columns exist; the key (``window_start`` + dimensions) is not null where the
    contracts make it so, and unique; ``window_start`` is in [start, end), aligned to the
    grain, and ``window_end = window_start + grain``; every measure stays within the bounds
    its kind derives from the contract (``lambdalake.views.measures``: counts and distinct
    counts are not null and non-negative, sums of fields with a non-negative minimum are at
    least that minimum, minima, maxima and percentiles stay within the contract's bounds);
    enum dimensions hold their contract's values. A dimension a join gives is never null
    and holds its entity contract's values or ``unknown``. A view with joins also has the
    *orphan rate* as a warning: at most ``quality.orphan_max_rate`` of the slice's events
    (its count measure) joined to ``unknown`` (parameter ``orphan_max_share``).

``entity_suite`` (one entity's rows of ``reference_history``, whole): the key, the
    validity interval and the contract's fields exist; the key, ``valid_from``, the version
    and every field the contract requires are not null; (key, version) is unique; no
    version is empty or overlaps the key's next (``_validity``); at most one version per
    key is open (``_open_versions``), so ``reference_current`` has one row per live key;
    enums and numbers hold the contract's values and bounds. Every rule is critical: the
    enriched views join this table.

``realtime_suite`` (rows the speed layer appended to a view's real-time table recently):
    the same window, dimension and measure rules as ``view_suite`` (shared helpers), adapted
    to how the table is written: every micro-batch appends each key it touched again, with
    ``batch_id``, ``shard`` and ``updated_at`` (all not null), so the key is unique *per
    shard's micro-batch* (key + ``shard`` + ``batch_id``), not in the table; no lineage
    columns; no interval, but no window may start more than one grain after the gate ran
    (parameter ``window_start_max``, ``realtime_parameters(now, view)``). Rows are partial
    aggregates (one micro-batch's
    events per key); a distinct count is a HyperLogLog sketch and a percentile a KLL
    sketch, which the gate estimates before validating, so they get the same checks as the
    exact values (a KLL sketch answers one of the values it holds: within the contract's
    bounds). Every rule is critical.

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
computes the same column from the same definition.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import great_expectations as gx  # the package's __init__ silenced GX analytics first
from great_expectations.expectations.expectation import Expectation
from great_expectations.expectations.metadata_types import FailureSeverity

from lambdalake.batch.recompute import LINEAGE_COLUMNS
from lambdalake.contracts.registry import ContractRegistry, EntityRegistry, FieldRule
from lambdalake.lake.bronze import (
    BRONZE_TABLE,
    QUARANTINE_COLUMNS,
    QUARANTINE_TABLE,
    bronze_columns,
)
from lambdalake.streaming.classification import QUARANTINE_REASONS
from lambdalake.views.definition import UNKNOWN_MEMBER, Measure, ViewDefinition, load_views

CRITICAL = FailureSeverity.CRITICAL
WARNING = FailureSeverity.WARNING

INTERVAL_START = "interval_start"
INTERVAL_END = "interval_end"
ROW_COUNT_MIN = "row_count_min"
ROW_COUNT_MAX = "row_count_max"
QUARANTINE_MAX_ROWS = "quarantine_max_rows"
ORPHAN_MAX_SHARE = "orphan_max_share"

BATCH_KEY = ("event_id", "event_type", "occurred_at")
"""What the batch layer itself reads from every bronze row (dedup, filter, window)."""
KAFKA_COORDINATES = ("topic", "partition", "offset")
PROVENANCE = ("event_date", "topic", "partition", "offset", "kafka_timestamp", "ingested_at")
"""Bronze's provenance columns the suite expects; ``key`` and ``raw_value`` (the record's
bytes, kept for forensics and replay) are read by no layer and not validated."""

WINDOW_START_MAX = "window_start_max"
"""The real-time suite's parameter: the latest plausible window start (``realtime_parameters``)."""
REALTIME_COLUMNS = ("batch_id", "shard", "updated_at")
"""What the speed layer stamps on each real-time row: its micro-batch, the speed shard that
ran it, and the write time."""

BRONZE_SUITE = BRONZE_TABLE
QUARANTINE_SUITE = QUARANTINE_TABLE
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


def quarantine_max_rows(arrived: int, max_rate: float) -> int:
    """The most quarantined records among ``arrived`` that keep the rate at ``max_rate``."""
    return math.floor(arrived * max_rate)


def realtime_parameters(now: datetime, view: ViewDefinition) -> dict[str, datetime]:
    """The real-time suite's parameters when validating at ``now``: a window may start up
    to one grain later (events up to ``ingest.max_future_skew_seconds`` ahead are valid)."""
    return {WINDOW_START_MAX: now + timedelta(seconds=view.grain_seconds)}


def view_suite_name(view: ViewDefinition) -> str:
    return f"view_{view.name}"


def realtime_suite_name(view: ViewDefinition) -> str:
    return f"realtime_{view.name}"


def check_name(expectation: Expectation) -> str:
    """The stable name of an expectation of these suites (``meta['check']``)."""
    return str((expectation.meta or {}).get("check", expectation.expectation_type))


def derived_columns(suite: gx.ExpectationSuite) -> dict[str, str]:
    """Columns (name: Spark SQL expression) the gate adds to a slice before validating it."""
    return dict((suite.meta or {}).get(DERIVED_COLUMNS) or {})


def _expect(
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


def _loosest_bounds(rules: list[FieldRule]) -> tuple[int | float | None, int | float | None]:
    """The bounds every one of ``rules`` satisfies (None: some rule has no such bound)."""
    if not rules:
        return None, None
    minima = [r.constraints.get("minimum") for r in rules]
    maxima = [r.constraints.get("maximum") for r in rules]
    lower = None if any(m is None for m in minima) else _number(min(map(Decimal, map(str, minima))))
    upper = None if any(m is None for m in maxima) else _number(max(map(Decimal, map(str, maxima))))
    return lower, upper


def _enum_values(rules: list[FieldRule]) -> list[Any] | None:
    """Every value the enums of ``rules`` allow (None: some rule has no enum)."""
    if not rules or any("enum" not in r.constraints for r in rules):
        return None
    return sorted({value for r in rules for value in r.constraints["enum"]})


def _rules(contracts: ContractRegistry, event_types: Iterable[str], name: str) -> list[FieldRule]:
    """The rules of field ``name`` in the newest contract of each type that has it."""
    found = (contracts.latest(t).fields.get(name) for t in event_types)
    return [rule for rule in found if rule is not None]


def _suite(
    name: str, expectations: list[Expectation], derived: dict[str, str] | None = None
) -> gx.ExpectationSuite:
    """A suite of exactly ``expectations`` (GX logs and drops invalid ones; we refuse)."""
    checks = [check_name(e) for e in expectations]
    duplicates = sorted({c for c in checks if checks.count(c) > 1})
    if duplicates:
        raise ValueError(f"suite {name}: duplicate checks {duplicates}")
    suite = gx.ExpectationSuite(name=name, expectations=expectations,
                                meta={DERIVED_COLUMNS: dict(derived or {})})
    if len(suite.expectations) != len(expectations):
        raise ValueError(f"suite {name}: GX refused {len(expectations) - len(suite.expectations)}"
                         " expectations")
    return suite


def _not_empty(subject: str, require_rows: bool) -> Expectation:
    if require_rows:
        rule = f"the {subject} slice has rows (it must, for this interval)"
    else:
        rule = f"the {subject} slice has rows (an empty one is legitimate: recorded only)"
    return _expect(gx.expectations.ExpectTableRowCountToBeBetween, "not_empty", rule,
                   CRITICAL if require_rows else WARNING, min_value=1)


def _usual_row_count(subject: str) -> Expectation:
    return _expect(gx.expectations.ExpectTableRowCountToBeBetween, "row_count:usual",
                   f"the {subject} slice holds about as many rows as recent intervals did "
                   "(their median per hour, scaled, within a factor; recorded only)", WARNING,
                   min_value={"$PARAMETER": ROW_COUNT_MIN},
                   max_value={"$PARAMETER": ROW_COUNT_MAX})


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
        name for name in fields if any(r.required for r in _rules(contracts, types, name))
    }
    expected_columns = [c for c in bronze_columns(contracts)
                        if c in required_anywhere or c in PROVENANCE]

    expectations: list[Expectation] = []
    derived: dict[str, str] = {}
    add = expectations.append
    add(_not_empty("bronze", require_rows))
    add(_usual_row_count("bronze"))
    add(_expect(gx.expectations.ExpectTableColumnsToMatchSet, "columns",
                "bronze has every column a contract requires and the provenance the batch "
                "layer reads (Kafka coordinates and time, event date, ingest time)",
                CRITICAL, column_set=expected_columns, exact_match=False))
    for column in KAFKA_COORDINATES:
        add(_expect(gx.expectations.ExpectColumnValuesToNotBeNull, f"not_null:{column}",
                    "every bronze row has its Kafka coordinates", CRITICAL, column=column))
    add(_expect(gx.expectations.ExpectCompoundColumnsToBeUnique,
                "unique:" + ",".join(KAFKA_COORDINATES),
                "a Kafka record lands in bronze exactly once (idempotent micro-batches)",
                CRITICAL, column_list=list(KAFKA_COORDINATES)))
    for name in fields:
        requiring = [t for t in types
                     if any(r.required for r in _rules(contracts, [t], name))]
        if not requiring:
            continue
        if len(requiring) == len(types):
            add(_expect(gx.expectations.ExpectColumnValuesToNotBeNull, f"not_null:{name}",
                        f"every contract requires {name}", severity(name), column=name))
        else:  # a derived column, not a row condition: one aggregation for every check
            missing = f"_missing_{name}"
            derived[missing] = missing_field(name, requiring)
            add(_expect(gx.expectations.ExpectColumnValuesToBeNull,
                        f"not_null:{name}[{','.join(requiring)}]",
                        f"the {', '.join(requiring)} contracts require {name} "
                        f"({missing} names each event without it)",
                        severity(name), about=name, column=missing))
    add(_expect(gx.expectations.ExpectColumnValuesToBeInSet, "in_set:event_type",
                "event_type is a type with a contract", CRITICAL,
                column="event_type", value_set=types))
    add(_expect(gx.expectations.ExpectColumnValuesToBeBetween, "in_interval:occurred_at",
                "the slice holds events whose event time is in [start, end)", CRITICAL,
                column="occurred_at", min_value={"$PARAMETER": INTERVAL_START},
                max_value={"$PARAMETER": INTERVAL_END}, strict_max=True))
    for name in fields:
        if name == "event_type":
            continue
        rules = _rules(contracts, types, name)
        allowed = _enum_values(rules)
        if allowed is not None:
            add(_expect(gx.expectations.ExpectColumnValuesToBeInSet, f"in_set:{name}",
                        f"{name} is one of the contract's values", severity(name),
                        column=name, value_set=allowed))
        if rules and all(r.json_type in ("integer", "number") for r in rules):
            lower, upper = _loosest_bounds(rules)
            if lower is not None or upper is not None:
                add(_expect(gx.expectations.ExpectColumnValuesToBeBetween, f"range:{name}",
                            f"{name} is within the contract's bounds [{lower}, {upper}]",
                            severity(name), column=name, min_value=lower, max_value=upper))
    return _suite(BRONZE_SUITE, expectations, derived)


def quarantine_suite() -> gx.ExpectationSuite:
    """The suite of the records quarantined in an arrival interval (see the module docstring)."""
    coordinates_and_reason = [*KAFKA_COORDINATES, "kafka_timestamp", "quarantine_reason"]
    return _suite(QUARANTINE_SUITE, [
        _expect(gx.expectations.ExpectTableColumnsToMatchSet, "columns",
                "quarantine keeps each record's bytes, Kafka coordinates and time, and why it "
                "was refused", CRITICAL, column_set=list(QUARANTINE_COLUMNS), exact_match=True),
        *(_expect(gx.expectations.ExpectColumnValuesToNotBeNull, f"not_null:{column}",
                  "every quarantined record says where it came from and why it was refused",
                  CRITICAL, column=column) for column in coordinates_and_reason),
        _expect(gx.expectations.ExpectCompoundColumnsToBeUnique,
                "unique:" + ",".join(KAFKA_COORDINATES),
                "a Kafka record is quarantined exactly once (idempotent micro-batches)",
                CRITICAL, column_list=list(KAFKA_COORDINATES)),
        _expect(gx.expectations.ExpectColumnValuesToBeInSet, "in_set:quarantine_reason",
                "the reason is one ingest gives", CRITICAL, column="quarantine_reason",
                value_set=list(QUARANTINE_REASONS)),
        _expect(gx.expectations.ExpectColumnValuesToBeBetween, "in_interval:kafka_timestamp",
                "the slice holds the records that arrived in [start, end)", CRITICAL,
                column="kafka_timestamp", min_value={"$PARAMETER": INTERVAL_START},
                max_value={"$PARAMETER": INTERVAL_END}, strict_max=True),
        _expect(gx.expectations.ExpectTableRowCountToBeBetween, "quarantine_rate",
                "at most quality.quarantine_max_rate of the records that arrived in the "
                "interval were quarantined (recorded only)", WARNING,
                max_value={"$PARAMETER": QUARANTINE_MAX_ROWS}),
    ])


def _dimension_required(contracts: ContractRegistry, view: ViewDefinition, name: str) -> bool:
    """Whether every event type the view reads requires dimension ``name`` (so null is a bug)."""
    rules = [contracts.latest(t).fields.get(name) for t in view.event_types]
    return all(rule is not None and rule.required for rule in rules)


def _measure_bounds(
    contracts: ContractRegistry, view: ViewDefinition, measure: Measure
) -> tuple[int | float | None, int | float | None]:
    """Bounds every value of the measure satisfies: its kind's, from the contracts' bounds
    of the measured column."""
    column_bounds: tuple[int | float | None, int | float | None] = (None, None)
    if measure.column is not None:
        column_bounds = _loosest_bounds(
            _rules(contracts, measure.event_types or view.event_types, measure.column))
    return measure.measure_kind.bounds(column_bounds)


def missing_field(name: str, event_types: list[str]) -> str:
    """SQL: the event (type and id) if it is of ``event_types`` and lacks ``name``, else null."""
    types = ", ".join(f"'{t}'" for t in event_types)
    return (f"CASE WHEN event_type IN ({types}) AND `{name}` IS NULL "
            "THEN concat(event_type, ' ', coalesce(event_id, '(no event_id)')) END")


def wrong_window(view: ViewDefinition) -> str:
    """SQL: 'start .. end' if the window is not [start, start + grain) aligned to the grain,
    else null. Spark SQL that DuckDB also runs (with ``DUCKDB_MACROS``): the one definition
    of a wrong window, for the Spark gates and the real-time gate alike."""
    grain = view.grain_seconds
    return (f"CASE WHEN NOT (window_end IS NOT DISTINCT FROM window_start + INTERVAL {grain} "
            "SECONDS) "
            f"OR unix_timestamp(window_start) % {grain} != 0 "
            "THEN concat(coalesce(cast(window_start AS STRING), 'null'), ' .. ', "
            "coalesce(cast(window_end AS STRING), 'null')) END")


def _window_checks(view: ViewDefinition) -> list[Expectation]:
    """Every row has its window, one grain long and aligned (the ``_window`` derived column)."""
    checks = [_expect(gx.expectations.ExpectColumnValuesToNotBeNull, f"not_null:{column}",
                      "every row has its window", CRITICAL, column=column)
              for column in ("window_start", "window_end")]
    checks.append(_expect(gx.expectations.ExpectColumnValuesToBeNull, "window",
                          f"window_end = window_start + {view.grain}, window_start aligned to "
                          "the grain (_window shows each wrong window)", CRITICAL,
                          about="window_start,window_end", column="_window"))
    return checks


def _dimension_checks(contracts: ContractRegistry, view: ViewDefinition) -> list[Expectation]:
    """Dimensions every event type of the view requires are not null; enum dimensions hold
    their contract's values. A joined attribute is never null (an event without a version
    has the unknown member) and holds its entity contract's values or the unknown member."""
    joined = {attribute: join for join in view.joins for attribute in join.attributes}
    entities = EntityRegistry() if joined else None
    checks = []
    for dimension in view.dimensions:
        if dimension in joined or _dimension_required(contracts, view, dimension):
            requires = (f"a join always gives {dimension} (or {UNKNOWN_MEMBER!r})"
                        if dimension in joined else
                        f"every event type of the view ({', '.join(view.event_types)}) "
                        f"requires {dimension}")
            checks.append(_expect(
                gx.expectations.ExpectColumnValuesToNotBeNull, f"not_null:{dimension}",
                requires, CRITICAL, column=dimension))
    for dimension in view.dimensions:
        if dimension in joined:
            assert entities is not None
            rule = entities.latest(joined[dimension].entity).fields[dimension]
            allowed = _enum_values([rule])
            allowed = None if allowed is None else [*allowed, UNKNOWN_MEMBER]
        else:
            allowed = _enum_values(_rules(contracts, view.event_types, dimension))
        if allowed is not None:
            checks.append(_expect(
                gx.expectations.ExpectColumnValuesToBeInSet, f"in_set:{dimension}",
                f"{dimension} is one of the contract's values", CRITICAL,
                column=dimension, value_set=allowed))
    return checks


def orphan_share(view: ViewDefinition) -> str | None:
    """SQL: the share of the slice's events (the view's first count of every event it
    reads) joined to the unknown member, on every row; None for a view without joins or
    without such a count."""
    count = next((m.name for m in view.measures if m.kind == "count" and not m.event_types),
                 None)
    if not view.joins or count is None:
        return None
    unknown = " OR ".join(f"`{a}` = '{UNKNOWN_MEMBER}'" for a in view.joined_columns)
    return (f"coalesce(sum(CASE WHEN {unknown} THEN `{count}` ELSE 0 END) OVER () "
            f"/ nullif(sum(`{count}`) OVER (), 0), 0)")


def _unique_check(key: list[str], rule: str) -> Expectation:
    """The rows are unique on ``key`` (a null is a key value: never ignored)."""
    if len(key) > 1:
        return _expect(gx.expectations.ExpectCompoundColumnsToBeUnique, "unique:" + ",".join(key),
                       rule, CRITICAL, column_list=key, ignore_row_if="never")
    return _expect(gx.expectations.ExpectColumnValuesToBeUnique, f"unique:{key[0]}", rule,
                   CRITICAL, column=key[0])


def _measure_checks(contracts: ContractRegistry, view: ViewDefinition) -> list[Expectation]:
    """Counts are not null; every measure stays within the bounds its kind and contract imply."""
    checks = []
    for measure in view.measures:
        kind = measure.measure_kind
        if kind.never_null:
            checks.append(_expect(gx.expectations.ExpectColumnValuesToNotBeNull,
                                  f"not_null:{measure.name}", f"a {measure.kind} is never null",
                                  CRITICAL, column=measure.name))
        lower, upper = _measure_bounds(contracts, view, measure)
        if lower is None and upper is None:
            continue
        checks.append(_expect(gx.expectations.ExpectColumnValuesToBeBetween,
                              f"range:{measure.name}", kind.bounds_rule(measure, lower, upper),
                              CRITICAL, column=measure.name, min_value=lower, max_value=upper))
    return checks


def view_suite(
    view: ViewDefinition,
    contracts: ContractRegistry | None = None,
    *,
    require_rows: bool = True,
) -> gx.ExpectationSuite:
    """The suite of one slice of ``view``'s batch table (see the module docstring)."""
    contracts = contracts or ContractRegistry()
    view.check_against(contracts)
    measures = [m.name for m in view.measures]
    expectations: list[Expectation] = [
        _not_empty(f"{view.name} view", require_rows),
        _usual_row_count(f"{view.name} view"),
        _expect(gx.expectations.ExpectTableColumnsToMatchSet, "columns",
                "the view has its window, dimensions, measures and lineage columns", CRITICAL,
                column_set=["window_start", "window_end", *view.dimensions, *measures,
                            *LINEAGE_COLUMNS],
                exact_match=False),
        *_window_checks(view),
        *_dimension_checks(contracts, view),
        _unique_check(view.key, "one row per window and dimensions" if view.dimensions
                      else "one row per window"),
        _expect(gx.expectations.ExpectColumnValuesToBeBetween, "in_interval:window_start",
                "the slice holds the windows that start in [start, end)", CRITICAL,
                column="window_start", min_value={"$PARAMETER": INTERVAL_START},
                max_value={"$PARAMETER": INTERVAL_END}, strict_max=True),
        *_measure_checks(contracts, view),
    ]
    for column in LINEAGE_COLUMNS:
        expectations.append(_expect(
            gx.expectations.ExpectColumnValuesToNotBeNull, f"not_null:{column}",
            "every row records how it was computed (lineage)", WARNING, column=column))
    derived = {"_window": wrong_window(view)}
    orphans = orphan_share(view)
    if orphans is not None:
        derived["_orphan_share"] = orphans
        expectations.append(_expect(
            gx.expectations.ExpectColumnMaxToBeBetween, "orphan_rate",
            f"at most quality.orphan_max_rate of the slice's events joined to "
            f"{UNKNOWN_MEMBER!r} (their key had no version at their time; recorded only)",
            WARNING, about=",".join(view.joined_columns), column="_orphan_share",
            max_value={"$PARAMETER": ORPHAN_MAX_SHARE}))
    return _suite(view_suite_name(view), expectations, derived)


def realtime_suite(
    view: ViewDefinition, contracts: ContractRegistry | None = None
) -> gx.ExpectationSuite:
    """The suite of recently appended rows of ``view``'s real-time table (see the module
    docstring); ``realtime_parameters`` gives its one parameter."""
    contracts = contracts or ContractRegistry()
    view.check_against(contracts)
    measures = [m.name for m in view.measures]
    expectations: list[Expectation] = [
        _expect(gx.expectations.ExpectTableColumnsToMatchSet, "columns",
                "the real-time table has its window, dimensions, measures, batch id and "
                "write time", CRITICAL,
                column_set=["window_start", "window_end", *view.dimensions, *measures,
                            *REALTIME_COLUMNS],
                exact_match=False),
        *_window_checks(view),
        *_dimension_checks(contracts, view),
        *(_expect(gx.expectations.ExpectColumnValuesToNotBeNull, f"not_null:{column}",
                  "every row records the micro-batch that wrote it and when (a key's newest "
                  "row is its value)", CRITICAL, column=column)
          for column in REALTIME_COLUMNS),
        _unique_check([*view.key, "shard", "batch_id"], "a shard's micro-batch writes each "
                      "key once (its partial aggregates of the batch)"),
        _expect(gx.expectations.ExpectColumnValuesToBeBetween, "not_future:window_start",
                "no window starts later than one grain after the gate ran (ingest refuses "
                "events from further in the future)", CRITICAL,
                column="window_start", max_value={"$PARAMETER": WINDOW_START_MAX}),
        *_measure_checks(contracts, view),
    ]
    return _suite(realtime_suite_name(view), expectations, {"_window": wrong_window(view)})


def entity_suite_name(entity: str) -> str:
    return f"reference_history_{entity}"


def overlapping_versions() -> str:
    """SQL: '<key> v<version>: …' for a version whose interval is empty or overlaps the key's
    next version, else null (SCD2: a key's versions follow each other without overlap)."""
    following = ("lead(valid_from) OVER (PARTITION BY entity_key "
                 "ORDER BY valid_from, version)")
    named = "concat(entity_key, ' v', cast(version AS STRING), "
    return ("CASE WHEN valid_to IS NOT NULL AND valid_to <= valid_from "
            f"THEN {named}': an empty interval') "
            f"WHEN {following} < coalesce(valid_to, TIMESTAMP '9999-12-31 00:00:00') "
            f"THEN {named}': overlaps the next version') END")


def open_versions() -> str:
    """SQL: the key if more than one of its versions is open (``valid_to`` null), else null:
    ``reference_current`` is the open versions, one row per live key."""
    return ("CASE WHEN sum(CASE WHEN valid_to IS NULL THEN 1 ELSE 0 END) "
            "OVER (PARTITION BY entity_key) > 1 THEN entity_key END")


def entity_suite(entity: str, entities: EntityRegistry | None = None) -> gx.ExpectationSuite:
    """The suite of one entity's rows of ``reference_history`` (see the module docstring)."""
    entities = entities or EntityRegistry()
    contract = entities.latest(entity)
    fields = contract.fields
    expectations: list[Expectation] = [
        _expect(gx.expectations.ExpectTableColumnsToMatchSet, "columns",
                "the history has the key, the validity interval, the version and the "
                "contract's fields", CRITICAL,
                column_set=["entity_key", "valid_from", "valid_to", "version", *fields],
                exact_match=False),
        *(_expect(gx.expectations.ExpectColumnValuesToNotBeNull, f"not_null:{column}",
                  "every version has its key, its start and its number", CRITICAL,
                  column=column) for column in ("entity_key", "valid_from", "version")),
        *(_expect(gx.expectations.ExpectColumnValuesToNotBeNull, f"not_null:{name}",
                  f"the {entity} contract requires {name}", CRITICAL, column=name)
          for name, rule in fields.items() if rule.required),
        _unique_check(["entity_key", "version"], "one row per key and version"),
        _expect(gx.expectations.ExpectColumnValuesToBeNull, "validity",
                "a key's versions follow each other: none is empty or overlaps the next "
                "(_validity shows each)", CRITICAL, about="valid_from,valid_to",
                column="_validity"),
        _expect(gx.expectations.ExpectColumnValuesToBeNull, "one_current_row_per_key",
                "at most one open version per key, so the current state has one row per "
                "live key (_open_versions shows each key with more)", CRITICAL,
                about="valid_to", column="_open_versions"),
    ]
    for name, rule in fields.items():
        allowed = _enum_values([rule])
        if allowed is not None:
            expectations.append(_expect(
                gx.expectations.ExpectColumnValuesToBeInSet, f"in_set:{name}",
                f"{name} is one of the {entity} contract's values", CRITICAL,
                column=name, value_set=allowed))
        lower, upper = _loosest_bounds([rule])
        if lower is not None or upper is not None:
            expectations.append(_expect(
                gx.expectations.ExpectColumnValuesToBeBetween, f"range:{name}",
                f"{name} is within the {entity} contract's bounds", CRITICAL,
                column=name, min_value=lower, max_value=upper))
    return _suite(entity_suite_name(entity), expectations,
                  {"_validity": overlapping_versions(), "_open_versions": open_versions()})
