"""``realtime_suite`` (rows the speed layer appended to a view's real-time table recently):
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
"""

from __future__ import annotations

from datetime import datetime, timedelta

import great_expectations as gx  # the package's __init__ silenced GX analytics first
from great_expectations.expectations.expectation import Expectation

from lambdalake.contracts.registry import ContractRegistry
from lambdalake.quality.suites.common import CRITICAL, expect_on, new_suite
from lambdalake.quality.suites.view import (
    dimension_checks,
    measure_checks,
    unique_check,
    window_checks,
    wrong_window,
)
from lambdalake.views.definition import ViewDefinition

WINDOW_START_MAX = "window_start_max"
"""The real-time suite's parameter: the latest plausible window start (``realtime_parameters``)."""
REALTIME_COLUMNS = ("batch_id", "shard", "updated_at")
"""What the speed layer stamps on each real-time row: its micro-batch, the speed shard that
ran it, and the write time."""


def realtime_parameters(now: datetime, view: ViewDefinition) -> dict[str, datetime]:
    """The real-time suite's parameters when validating at ``now``: a window may start up
    to one grain later (events up to ``ingest.max_future_skew_seconds`` ahead are valid)."""
    return {WINDOW_START_MAX: now + timedelta(seconds=view.grain_seconds)}


def realtime_suite_name(view: ViewDefinition) -> str:
    return f"realtime_{view.name}"


def realtime_suite(
    view: ViewDefinition, contracts: ContractRegistry | None = None
) -> gx.ExpectationSuite:
    """The suite of recently appended rows of ``view``'s real-time table (see the module
    docstring); ``realtime_parameters`` gives its one parameter."""
    contracts = contracts or ContractRegistry()
    view.check_against(contracts)
    measures = [m.name for m in view.measures]
    expectations: list[Expectation] = [
        expect_on(gx.expectations.ExpectTableColumnsToMatchSet, "columns",
                "the real-time table has its window, dimensions, measures, batch id and "
                "write time", CRITICAL,
                column_set=["window_start", "window_end", *view.dimensions, *measures,
                            *REALTIME_COLUMNS],
                exact_match=False),
        *window_checks(view),
        *dimension_checks(contracts, view),
        *(expect_on(gx.expectations.ExpectColumnValuesToNotBeNull, f"not_null:{column}",
                  "every row records the micro-batch that wrote it and when (a key's newest "
                  "row is its value)", CRITICAL, column=column)
          for column in REALTIME_COLUMNS),
        unique_check([*view.key, "shard", "batch_id"], "a shard's micro-batch writes each "
                      "key once (its partial aggregates of the batch)"),
        expect_on(gx.expectations.ExpectColumnValuesToBeBetween, "not_future:window_start",
                "no window starts later than one grain after the gate ran (ingest refuses "
                "events from further in the future)", CRITICAL,
                column="window_start", max_value={"$PARAMETER": WINDOW_START_MAX}),
        *measure_checks(contracts, view),
    ]
    return new_suite(realtime_suite_name(view), expectations, {"_window": wrong_window(view)})
