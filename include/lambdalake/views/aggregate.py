"""A view's aggregation in Spark: the batch layer's exact computation.

``aggregate(events, view)`` reads the definition (window, event types, derived columns,
filters, dimensions, measures) and nothing else. The speed layer reads the same definition
on Arrow, one micro-batch at a time (``lambdalake.speed.partials.partials_of``), where a
distinct count is a HyperLogLog sketch instead of a count, a percentile a KLL sketch, a
top-k a frequent-items sketch and a mean its moments (``lambdalake.views.measures``);
expressions compile from one typed tree for both (``lambdalake.views.expressions``), and
the convergence tests hold the two to the same answers.
"""

from __future__ import annotations

import operator
from functools import reduce
from typing import TYPE_CHECKING

from lambdalake.views.definition import Measure, ViewDefinition
from lambdalake.views.expressions import to_spark
from lambdalake.views.measures import ORDER

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


def value_column(measure: Measure) -> str:
    """The column of the values ``measure`` aggregates, while the view aggregates."""
    return f"_value_{measure.name}"


def measured_values(view: ViewDefinition, measure: Measure) -> Column:
    """The values ``measure`` aggregates: its column (1 per event for a count), null for
    the events its ``event_types`` or its ``filter`` leave out; for an ordered kind each
    value with its place in the events' order (``measures.ORDER``)."""
    from pyspark.sql import functions as F

    value = F.lit(1) if measure.column is None else F.col(measure.column)
    if measure.event_types:
        value = F.when(F.col("event_type").isin(measure.event_types), value)
    condition = view.expressions.measure_filters.get(measure.name)
    if condition is not None:
        value = F.when(to_spark(condition), value)
    if measure.measure_kind.ordered:  # each value with its event's place in the order
        place = [F.col(view.event_time).alias("at"), *(F.col(f) for f in ORDER[1:])]
        value = F.when(value.isNotNull(), F.struct(*place, value.alias("value")))
    return value


def filtered_events(events: DataFrame, view: ViewDefinition) -> DataFrame:
    """The events ``view`` reads, with its derived columns, passing its filter."""
    from pyspark.sql import functions as F

    events = events.where(F.col("event_type").isin(view.event_types))
    for name, expression in view.expressions.columns.items():
        events = events.withColumn(name, to_spark(expression))
    if view.expressions.filter is not None:
        events = events.where(to_spark(view.expressions.filter))
    return events


def aggregate(events: DataFrame, view: ViewDefinition) -> DataFrame:
    """Rows of ``view`` (window_start, window_end, dimensions..., measures...) over ``events``.

    A measure whose kind aggregates apart (``top_k``) is its own aggregation of the same
    events, joined to the rows by key."""
    from pyspark.sql import functions as F

    key = ["window", *view.dimensions]
    measured = filtered_events(events, view).withColumns(
        {value_column(m): measured_values(view, m) for m in view.measures}).withColumn(
        "window", F.window(F.col(view.event_time), f"{view.grain_seconds} seconds",
                           f"{view.slide_seconds} seconds"))
    types = dict(measured.dtypes)
    aggregates = [m.measure_kind.batch_aggregate(m, value_column(m), types[value_column(m)])
                  .alias(m.name) for m in view.measures if not m.measure_kind.apart]
    rows = (measured.groupBy(*key).agg(*aggregates) if aggregates
            else measured.select(*key).distinct())
    for m in view.measures:
        if m.measure_kind.apart:
            rows = joined_by_key(rows, m.measure_kind.batch_apart(
                m, measured, key, value_column(m)), key)
    return rows.select(
        F.col("window.start").alias("window_start"),
        F.col("window.end").alias("window_end"),
        *view.dimensions,
        *(m.name for m in view.measures),
    )


def joined_by_key(rows: DataFrame, other: DataFrame, key: list[str]) -> DataFrame:
    """``rows`` with the other columns of ``other``, matched on ``key`` null-safely (a
    dimension may be NULL, and a NULL key is a key like any other)."""
    from pyspark.sql import functions as F

    renamed = other.withColumnsRenamed({column: f"_other_{column}" for column in key})
    matched = reduce(operator.and_, (F.col(column).eqNullSafe(F.col(f"_other_{column}"))
                                     for column in key))
    return rows.join(renamed, matched, "left").drop(*(f"_other_{column}" for column in key))
