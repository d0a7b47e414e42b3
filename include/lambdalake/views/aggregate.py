"""The one aggregation of a view, for both layers.

``aggregate(events, view, exact=True)`` is the batch layer's computation: exact measures,
distinct counts included. With ``exact=False`` the same definition yields the speed
layer's *partial aggregates* of one micro-batch: counts, sums, minima and maxima of the
batch's events, and for a distinct count the batch's HyperLogLog sketch (binary), because
exact distinct sets cannot be added up across batches. Partial rows of the same key add
up to the key's value (``lambdalake.speed.partials``). Everything else (window,
dimensions, filters, the other measures) is the same expression in both layers.

The sketch is Apache DataSketches' (``hll_sketch_agg``), sized from the view's
``approx_distinct_rsd``, in the format every DataSketches library reads, so the read path
unions and estimates it without a JVM.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lambdalake.views.definition import Measure, ViewDefinition

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


def measure_column(measure: Measure, view: ViewDefinition, exact: bool) -> Column:
    """The aggregate expression of one measure (its event-type filter applied)."""
    from pyspark.sql import functions as F

    value = F.lit(1) if measure.column is None else F.col(measure.column)
    if measure.event_types:
        value = F.when(F.col("event_type").isin(measure.event_types), value)
    if measure.kind == "count":
        result = F.count(value)
    elif measure.kind == "sum":
        result = F.sum(value)
    elif measure.kind == "min":
        result = F.min(value)
    elif measure.kind == "max":
        result = F.max(value)
    elif exact:
        result = F.count_distinct(value)
    else:
        result = F.hll_sketch_agg(value, view.sketch_lg_k)
    return result.alias(measure.name)


def aggregate(events: DataFrame, view: ViewDefinition, exact: bool = True) -> DataFrame:
    """Rows of ``view`` (window_start, window_end, dimensions..., measures...) over ``events``."""
    from pyspark.sql import functions as F

    window = F.window(F.col(view.event_time), f"{view.grain_seconds} seconds")
    return (
        events.where(F.col("event_type").isin(view.event_types))
        .groupBy(window.alias("window"), *view.dimensions)
        .agg(*(measure_column(m, view, exact) for m in view.measures))
        .select(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            *view.dimensions,
            *(m.name for m in view.measures),
        )
    )
