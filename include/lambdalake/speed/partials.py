"""Real-time rows are partial aggregates: a key's rows, combined, are the key's value.

Each micro-batch of the speed layer appends, for every key it touched, the aggregates of
that batch's events alone (``partials_of``). Combining a key's rows gives its
value over every batch: counts and sums add, minima and maxima keep the smallest and the
largest, HyperLogLog and KLL sketches union (each kind says how:
``lambdalake.views.measures``). ``merge_partials`` combines the rows of each key into
one row that is still a partial (so it can be merged again, and written back by the serving
step's compaction); ``with_estimates`` replaces each sketch by its estimate (the kind's
final value), which is what a query shows. Both run on Arrow with the DataSketches library, no JVM.

Why partials and not each key's running total: a total needs the aggregation's state in
the stream (a state store per view, restored and saved on every micro-batch), and one
streaming query per view. Partials need no aggregation state, so one query per lateness
allowance parses and deduplicates the events once and aggregates each view from the same
micro-batch, collected as Arrow: a few thousand rows, aggregated in milliseconds, where a
Spark job per view cost a quarter of a second each on two cores.

>>> partials = partials_of(batch, view)  # doctest: +SKIP
>>> merged = merge_partials(rows, view)     # doctest: +SKIP
>>> with_estimates(merged, view)            # doctest: +SKIP
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from lambdalake.views.definition import Measure, ViewDefinition
from lambdalake.views.expressions import evaluate_arrow
from lambdalake.views.measures import ORDER

if TYPE_CHECKING:
    import pyarrow as pa

_NEWEST = ("window_end", "batch_id", "shard", "updated_at")
"""Bookkeeping columns: a merged row keeps the newest value of each."""


def kind_merged_measures(view: ViewDefinition) -> list[Measure]:
    """The measures whose partials their kind combines (sketches, moments, ordered
    values), not Arrow."""
    return [m for m in view.measures if m.measure_kind.merged_by_kind]


def row_numbers(columns: dict[str, pa.Array | pa.ChunkedArray]) -> dict[str, pa.Array]:
    """Each column's row numbers, null where its value is: what a hash aggregation lists in
    place of values Arrow cannot list (structs, lists), which ``looked_up`` turns back."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return {name: pc.if_else(pc.is_null(column), pa.scalar(None, pa.int64()),
                             pa.array(range(len(column)), pa.int64()))
            for name, column in columns.items()}


def looked_up(listed: pa.Array | pa.ChunkedArray, values: pa.Array | pa.ChunkedArray
              ) -> list[list[Any]]:
    """Each group's list of row numbers (``row_numbers``) as those rows' values."""
    present = values.to_pylist()
    return [[None if row is None else present[row] for row in rows]
            for rows in listed.to_pylist()]


def ordered_values(events: pa.Table, view: ViewDefinition, value: pa.Array) -> pa.Array:
    """An ordered kind's values (``views.measures.ORDER``): each with its event's time and
    Kafka coordinates, as the batch layer's struct (``views.aggregate.measured_values``);
    null where the value is."""
    import pyarrow as pa
    import pyarrow.compute as pc

    value = value.combine_chunks() if isinstance(value, pa.ChunkedArray) else value
    place = [events[view.event_time], *(events[name] for name in ORDER[1:])]
    arrays = [column.combine_chunks() for column in place] + [value]
    return pa.StructArray.from_arrays(arrays, names=list(ORDER) + ["value"],
                                      mask=pc.is_null(value))


def in_windows(events: pa.Table, view: ViewDefinition) -> tuple[pa.Table, pa.ChunkedArray]:
    """``events`` once per window each counts in, with that window's start: epoch-aligned
    as Spark's ``window`` (the UTC instant floored to the slide, and for hopping windows
    the ``grain / slide - 1`` starts before it; ``ViewDefinition.window_starts``)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    instant = events[view.event_time].cast(pa.timestamp("us"))
    newest = pc.floor_temporal(instant, multiple=view.slide_seconds, unit="second")
    starts = [pc.subtract(newest, pa.scalar(timedelta(seconds=hop * view.slide_seconds)))
              for hop in range(view.windows_per_event)]
    chunks = [chunk for start in starts for chunk in pa.chunked_array(start).chunks]
    window_start = pa.chunked_array(chunks, pa.timestamp("us")).cast(
        pa.timestamp("us", tz="UTC"))
    return pa.concat_tables([events] * view.windows_per_event), window_start


def partials_of(events: pa.Table, view: ViewDefinition) -> pa.Table:
    """The partial aggregates of ``view`` over ``events`` (one micro-batch of distinct
    events): a row per key the batch touched, with the schema of the view's real-time table.

    This is ``aggregate`` (``lambdalake.views.aggregate``) read on Arrow: the same window,
    event types, derived columns, filters, dimensions and measure filters, with the values
    of a kind that merges its own partials kept as one (a sketch, moments, ordered values).
    The speed layer aggregates a micro-batch here rather than with a Spark job per view,
    which cost more than the aggregation itself.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    events = events.filter(pc.is_in(events["event_type"], pa.array(view.event_types)))
    expressions = view.expressions
    for name, expression in expressions.columns.items():
        events = events.append_column(name, evaluate_arrow(expression, events))
    if expressions.filter is not None:
        events = events.filter(evaluate_arrow(expressions.filter, events))  # null: dropped
    events, window_start = in_windows(events, view)
    columns = {"window_start": window_start,
               **{name: events[name] for name in view.dimensions}}
    for measure in view.measures:
        value = (pa.repeat(1, events.num_rows) if measure.column is None
                 else events[measure.column])
        if measure.event_types:
            counted = pc.is_in(events["event_type"], pa.array(measure.event_types))
            value = pc.if_else(counted, value, pa.scalar(None, value.type))
        condition = expressions.measure_filters.get(measure.name)
        if condition is not None:
            value = pc.if_else(evaluate_arrow(condition, events), value,
                               pa.scalar(None, value.type))
        if measure.measure_kind.ordered:
            value = ordered_values(events, view, value)
        columns[measure.name] = value
    values = {m.name: columns[m.name] for m in kind_merged_measures(view)}
    aggregations = [(m.name, m.measure_kind.micro_batch) for m in view.measures]
    grouped = (pa.table(columns | row_numbers(values))
               .group_by(view.key, use_threads=False).aggregate(aggregations))
    start = grouped.column("window_start")
    result = {
        "window_start": start,
        "window_end": pc.add(start, pa.scalar(timedelta(seconds=view.grain_seconds))),
        **{name: grouped.column(name) for name in view.dimensions},
    }
    fields = [pa.field(name, column.type) for name, column in result.items()]
    for measure in view.measures:
        kind = measure.measure_kind
        combined = grouped.column(f"{measure.name}_{kind.micro_batch}")
        partial_type = kind.partial_type(columns[measure.name].type)
        if kind.merged_by_kind:
            combined = pa.array([kind.sketch(group, view, measure)
                                 for group in looked_up(combined, values[measure.name])],
                                partial_type)
        result[measure.name] = combined
        fields.append(pa.field(measure.name, partial_type, nullable=not kind.never_null))
    return pa.table(result).cast(pa.schema(fields))


def merge_partials(rows: pa.Table, view: ViewDefinition) -> pa.Table:
    """One row per key of ``view`` (window and dimensions), combining its partial rows;
    the schema is ``rows``'."""
    import pyarrow as pa

    aggregations = [(column, "max") for column in _NEWEST if column in rows.schema.names]
    aggregations += [(m.name, m.measure_kind.combine) for m in view.measures]
    partials = {m.name: rows.column(m.name) for m in kind_merged_measures(view)}
    # one thread keeps each list in row order, which makes unions reproducible
    listed = pa.table({**{name: rows.column(name) for name in rows.schema.names},
                       **row_numbers(partials)})
    grouped = listed.group_by(view.key, use_threads=False).aggregate(aggregations)
    columns = {name: grouped.column(f"{name}_{function}") for name, function in aggregations}
    columns |= {name: grouped.column(name) for name in view.key}
    for measure in kind_merged_measures(view):
        kind = measure.measure_kind
        columns[measure.name] = pa.array(
            [kind.union(group, view, measure)
             for group in looked_up(columns[measure.name], partials[measure.name])],
            rows.schema.field(measure.name).type,
        )
    return pa.table([columns[name] for name in rows.schema.names],
                    schema=rows.schema)


def with_estimates(rows: pa.Table, view: ViewDefinition) -> pa.Table:
    """``rows`` with each sketch replaced by its estimate (the kind's final value)."""
    import pyarrow as pa

    for measure in kind_merged_measures(view):
        kind = measure.measure_kind
        index = rows.schema.get_field_index(measure.name)
        final_type = kind.final_type(rows.schema.field(index).type)
        estimates = pa.array([kind.final(partial, view, measure)
                              for partial in rows.column(index).to_pylist()], final_type)
        rows = rows.set_column(index, pa.field(measure.name, final_type), estimates)
    return rows
