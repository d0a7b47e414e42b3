"""``view_suite`` (one slice of a batch view, rows whose ``window_start`` is in [start, end)): the
    view's columns exist; the key (``window_start`` + dimensions) is not null where the contracts
    make it so, and unique; ``window_start`` is in [start, end), aligned to the slide (the grain,
    for tumbling windows), and ``window_end = window_start + grain``; every measure stays within the
    bounds its kind derives from the contract (``lambdalake.views.measures``: counts and distinct
    counts are not null and non-negative, sums of fields with a non-negative minimum are at least
    that minimum, minima, maxima and percentiles stay within the contract's bounds); enum dimensions
    hold their contract's values. A dimension a join gives is never null and holds its entity
    contract's values or ``unknown``. A view with joins also has the *orphan rate* as a warning: at
    most ``quality.orphan_max_rate`` of each window's events (its count measure) joined to
    ``unknown`` (parameter ``orphan_max_share``).
"""

from __future__ import annotations

import great_expectations as gx  # the package's __init__ silenced GX analytics first
from great_expectations.expectations.expectation import Expectation

from lambdalake.batch.recompute import LINEAGE_COLUMNS
from lambdalake.contracts.registry import ContractRegistry, EntityRegistry
from lambdalake.quality.suites.common import (
    CRITICAL,
    INTERVAL_END,
    INTERVAL_START,
    ORPHAN_MAX_SHARE,
    WARNING,
    enum_values_of,
    expect_on,
    field_rules,
    loosest_bounds_of,
    new_suite,
    not_empty_check,
    usual_row_count_check,
)
from lambdalake.views.definition import UNKNOWN_MEMBER, Measure, ViewDefinition


def view_suite_name(view: ViewDefinition) -> str:
    return f"view_{view.name}"


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
        column_bounds = loosest_bounds_of(
            field_rules(contracts, measure.event_types or view.event_types, measure.column))
    return measure.measure_kind.bounds(column_bounds)


def missing_field(name: str, event_types: list[str]) -> str:
    """SQL: the event (type and id) if it is of ``event_types`` and lacks ``name``, else null."""
    types = ", ".join(f"'{t}'" for t in event_types)
    return (f"CASE WHEN event_type IN ({types}) AND `{name}` IS NULL "
            "THEN concat(event_type, ' ', coalesce(event_id, '(no event_id)')) END")


def wrong_window(view: ViewDefinition) -> str:
    """SQL: 'start .. end' if the window is not [start, start + grain) aligned to the
    slide, else null. Spark SQL that DuckDB also runs (with ``DUCKDB_MACROS``): the one definition
    of a wrong window, for the Spark gates and the real-time gate alike."""
    grain, slide = view.grain_seconds, view.slide_seconds
    return (f"CASE WHEN NOT (window_end IS NOT DISTINCT FROM window_start + INTERVAL {grain} "
            "SECONDS) "
            f"OR unix_timestamp(window_start) % {slide} != 0 "
            "THEN concat(coalesce(cast(window_start AS STRING), 'null'), ' .. ', "
            "coalesce(cast(window_end AS STRING), 'null')) END")


def window_checks(view: ViewDefinition) -> list[Expectation]:
    """Every row has its window, one grain long and aligned to the slide (the ``_window``
    derived column)."""
    checks = [expect_on(gx.expectations.ExpectColumnValuesToNotBeNull, f"not_null:{column}",
                      "every row has its window", CRITICAL, column=column)
              for column in ("window_start", "window_end")]
    checks.append(expect_on(gx.expectations.ExpectColumnValuesToBeNull, "window",
                          f"window_end = window_start + {view.grain}, window_start aligned to "
                          f"the {'slide' if view.slide else 'grain'} (_window shows each wrong "
                          "window)", CRITICAL,
                          about="window_start,window_end", column="_window"))
    return checks


def dimension_checks(contracts: ContractRegistry, view: ViewDefinition) -> list[Expectation]:
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
            checks.append(expect_on(
                gx.expectations.ExpectColumnValuesToNotBeNull, f"not_null:{dimension}",
                requires, CRITICAL, column=dimension))
    for dimension in view.dimensions:
        if dimension in joined:
            assert entities is not None
            rule = entities.latest(joined[dimension].entity).fields[dimension]
            allowed = enum_values_of([rule])
            allowed = None if allowed is None else [*allowed, UNKNOWN_MEMBER]
        else:
            allowed = enum_values_of(field_rules(contracts, view.event_types, dimension))
        if allowed is not None:
            checks.append(expect_on(
                gx.expectations.ExpectColumnValuesToBeInSet, f"in_set:{dimension}",
                f"{dimension} is one of the contract's values", CRITICAL,
                column=dimension, value_set=allowed))
    return checks


def orphan_share(view: ViewDefinition) -> str | None:
    """SQL: on every row, the share of its window's events (the view's first count of every
    event it reads) joined to the unknown member; None for a view without joins or without
    such a count. Judged per window, so a run's length does not change the verdict: a window
    of orphans warns whether its run covers an hour or three days."""
    count = next((m.name for m in view.measures if m.kind == "count" and not m.event_types),
                 None)
    if not view.joins or count is None:
        return None
    unknown = " OR ".join(f"`{a}` = '{UNKNOWN_MEMBER}'" for a in view.joined_columns)
    per_window = "OVER (PARTITION BY window_start)"
    return (f"coalesce(sum(CASE WHEN {unknown} THEN `{count}` ELSE 0 END) {per_window} "
            f"/ nullif(sum(`{count}`) {per_window}, 0), 0)")


def unique_check(key: list[str], rule: str) -> Expectation:
    """The rows are unique on ``key`` (a null is a key value: never ignored)."""
    if len(key) > 1:
        return expect_on(gx.expectations.ExpectCompoundColumnsToBeUnique, "unique:" + ",".join(key),
                       rule, CRITICAL, column_list=key, ignore_row_if="never")
    return expect_on(gx.expectations.ExpectColumnValuesToBeUnique, f"unique:{key[0]}", rule,
                   CRITICAL, column=key[0])


def measure_checks(contracts: ContractRegistry, view: ViewDefinition) -> list[Expectation]:
    """Counts are not null; every measure stays within the bounds its kind and contract imply."""
    checks = []
    for measure in view.measures:
        kind = measure.measure_kind
        if kind.never_null:
            checks.append(expect_on(gx.expectations.ExpectColumnValuesToNotBeNull,
                                  f"not_null:{measure.name}", f"a {measure.kind} is never null",
                                  CRITICAL, column=measure.name))
        lower, upper = _measure_bounds(contracts, view, measure)
        if lower is None and upper is None:
            continue
        checks.append(expect_on(gx.expectations.ExpectColumnValuesToBeBetween,
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
        not_empty_check(f"{view.name} view", require_rows),
        usual_row_count_check(f"{view.name} view"),
        expect_on(gx.expectations.ExpectTableColumnsToMatchSet, "columns",
                "the view has its window, dimensions, measures and lineage columns", CRITICAL,
                column_set=["window_start", "window_end", *view.dimensions, *measures,
                            *LINEAGE_COLUMNS],
                exact_match=False),
        *window_checks(view),
        *dimension_checks(contracts, view),
        unique_check(view.key, "one row per window and dimensions" if view.dimensions
                      else "one row per window"),
        expect_on(gx.expectations.ExpectColumnValuesToBeBetween, "in_interval:window_start",
                "the slice holds the windows that start in [start, end)", CRITICAL,
                column="window_start", min_value={"$PARAMETER": INTERVAL_START},
                max_value={"$PARAMETER": INTERVAL_END}, strict_max=True),
        *measure_checks(contracts, view),
    ]
    for column in LINEAGE_COLUMNS:
        expectations.append(expect_on(
            gx.expectations.ExpectColumnValuesToNotBeNull, f"not_null:{column}",
            "every row records how it was computed (lineage)", WARNING, column=column))
    derived = {"_window": wrong_window(view)}
    orphans = orphan_share(view)
    if orphans is not None:
        derived["_orphan_share"] = orphans
        expectations.append(expect_on(
            gx.expectations.ExpectColumnMaxToBeBetween, "orphan_rate",
            f"at most quality.orphan_max_rate of each window's events joined to "
            f"{UNKNOWN_MEMBER!r} (their key had no version at their time; recorded only)",
            WARNING, about=",".join(view.joined_columns), column="_orphan_share",
            max_value={"$PARAMETER": ORPHAN_MAX_SHARE}))
    return new_suite(view_suite_name(view), expectations, derived)
