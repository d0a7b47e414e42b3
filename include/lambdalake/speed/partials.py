"""Real-time rows are partial aggregates: a key's rows, combined, are the key's value.

Each micro-batch of the speed layer appends, for every key it touched, the aggregates of
that batch's events alone (``aggregate(exact=False)``). Combining a key's rows gives its
value over every batch: counts and sums add, minima and maxima keep the smallest and the
largest, HyperLogLog sketches union. ``merge_partials`` combines the rows of each key into
one row that is still a partial (so it can be merged again, and written back by the serving
step's compaction); ``with_estimates`` replaces each sketch by its estimate, which is what
a query shows. Both run on Arrow with the DataSketches library, no JVM.

Why partials and not each key's running total: a total needs the aggregation's state in
the stream (a state store per view, restored and saved on every micro-batch), and one
streaming query per view. Partials need no aggregation state, so one query per lateness
allowance parses and deduplicates the events once and aggregates each view from the same
cached micro-batch.

>>> merged = merge_partials(rows, view)     # doctest: +SKIP
>>> with_estimates(merged, view)            # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from lambdalake.views.definition import Measure, ViewDefinition

if TYPE_CHECKING:
    import pyarrow as pa

_COMBINE = {"count": "sum", "sum": "sum", "min": "min", "max": "max", "distinct_count": "list"}
"""How the partials of a measure kind combine (an Arrow hash aggregation; ``list``: the
sketches, unioned afterwards)."""
_NEWEST = ("window_end", "batch_id", "updated_at")
"""Bookkeeping columns: a merged row keeps the newest value of each."""


def distinct_measures(view: ViewDefinition) -> list[Measure]:
    return [m for m in view.measures if m.kind == "distinct_count"]


def merge_partials(rows: pa.Table, view: ViewDefinition) -> pa.Table:
    """One row per key of ``view`` (window and dimensions), combining its partial rows;
    the schema is ``rows``'."""
    import pyarrow as pa

    aggregations = [(column, "max") for column in _NEWEST if column in rows.schema.names]
    aggregations += [(m.name, _COMBINE[m.kind]) for m in view.measures]
    # one thread keeps each list in row order, which makes unions reproducible
    grouped = rows.group_by(view.key, use_threads=False).aggregate(aggregations)
    columns = {name: grouped.column(f"{name}_{function}") for name, function in aggregations}
    columns |= {name: grouped.column(name) for name in view.key}
    for measure in distinct_measures(view):
        columns[measure.name] = pa.array(
            [union(sketches, view.sketch_lg_k) for sketches in columns[measure.name].to_pylist()],
            pa.binary(),
        )
    return pa.table([columns[name] for name in rows.schema.names],
                    schema=rows.schema)


def union(sketches: list[bytes | None], lg_k: int) -> bytes | None:
    """The union of serialized HLL sketches (itself when there is one)."""
    from datasketches import hll_sketch, hll_union, tgt_hll_type

    present = [sketch for sketch in sketches if sketch is not None]
    if len(present) <= 1:
        return present[0] if present else None
    combined = hll_union(lg_k)
    for sketch in present:
        combined.update(hll_sketch.deserialize(sketch))
    return bytes(combined.get_result(tgt_hll_type.HLL_8).serialize_compact())


def sketch_of(values: Iterable[object], lg_k: int) -> bytes:
    """The serialized HLL sketch of ``values``, as ``hll_sketch_agg`` makes it: partials
    written without Spark (tests, benchmarks) combine with the speed layer's."""
    from datasketches import hll_sketch, tgt_hll_type

    sketch = hll_sketch(lg_k, tgt_hll_type.HLL_8)
    for value in values:
        sketch.update(value)
    return bytes(sketch.serialize_compact())


def estimate(sketch: bytes | None) -> int | None:
    """The distinct count a serialized HLL sketch estimates, as a whole number."""
    from datasketches import hll_sketch

    return None if sketch is None else round(hll_sketch.deserialize(sketch).get_estimate())


def with_estimates(rows: pa.Table, view: ViewDefinition) -> pa.Table:
    """``rows`` with each distinct count's sketch replaced by its estimate (int64)."""
    import pyarrow as pa

    for measure in distinct_measures(view):
        index = rows.schema.get_field_index(measure.name)
        estimates = pa.array([estimate(s) for s in rows.column(index).to_pylist()], pa.int64())
        rows = rows.set_column(index, pa.field(measure.name, pa.int64()), estimates)
    return rows
