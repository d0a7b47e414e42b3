"""A view's aggregation in Spark: the batch layer's exact computation.

``aggregate(events, view)`` reads the definition (window, event types, dimensions,
measures and their filters) and nothing else. The speed layer reads the same definition
on Arrow, one micro-batch at a time (``lambdalake.speed.partials.partials_of``), where a
distinct count is a HyperLogLog sketch instead of a count and a percentile a KLL
sketch (``lambdalake.views.measures``); the convergence tests hold the
two to the same answers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lambdalake.views.definition import Measure, ViewDefinition

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


def measure_column(measure: Measure) -> Column:
    """The aggregate expression of one measure (its event-type filter applied)."""
    return measure.measure_kind.batch_aggregate(measure).alias(measure.name)


def aggregate(events: DataFrame, view: ViewDefinition) -> DataFrame:
    """Rows of ``view`` (window_start, window_end, dimensions..., measures...) over ``events``."""
    from pyspark.sql import functions as F

    window = F.window(F.col(view.event_time), f"{view.grain_seconds} seconds")
    return (
        events.where(F.col("event_type").isin(view.event_types))
        .groupBy(window.alias("window"), *view.dimensions)
        .agg(*(measure_column(m) for m in view.measures))
        .select(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            *view.dimensions,
            *(m.name for m in view.measures),
        )
    )
