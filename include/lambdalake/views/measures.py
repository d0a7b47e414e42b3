"""The measure kinds: what each kind of measure means in every layer, defined once.

A view's measures name a kind (``count``, ``sum``, ``min``, ``max``, ``distinct_count``,
``approx_percentile``). Like Chronon's aggregators and Summingbird's monoids, a kind is one
object that knows

* its **batch aggregate**: the exact Spark expression over an interval's events;
* its **partial**: how one micro-batch's values aggregate on Arrow (``micro_batch``, then
  ``sketch`` for the kinds kept as sketches), and how partials **combine** (``combine``,
  then ``union``): partials of any micro-batches combine into the partial of all of them;
* its **final value**: what a query shows of a partial (an estimate, for sketches);
* its **expectation bounds**: the range every value lies in, from the measured column's
  contract bounds;
* its **reconciliation rule**: when a closed window's real-time value agrees with the batch
  layer's, and which way events dropped as too late move it.

The batch layer (``lambdalake.views.aggregate``), the speed layer
(``lambdalake.speed.partials``), the quality suites and the serving step's reconciliation
look the kind up here; adding a kind is adding an entry to ``MEASURE_KINDS``.

>>> MEASURE_KINDS["sum"].combine
'sum'
>>> MEASURE_KINDS["distinct_count"].exact_in_speed_layer
False
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column

Bounds = tuple[int | float | None, int | float | None]


class MeasureSpec(Protocol):
    """What a kind reads of a measure's definition (``views.definition.Measure``)."""

    @property
    def name(self) -> str: ...
    @property
    def column(self) -> str | None: ...
    @property
    def event_types(self) -> list[str] | None: ...
    @property
    def percentile(self) -> float | None: ...


class SketchSettings(Protocol):
    """What a kind reads of its view's definition: the sketches' parameters and stated
    errors (``views.definition.ViewDefinition``)."""

    @property
    def sketch_lg_k(self) -> int: ...
    @property
    def approx_distinct_rsd(self) -> float: ...
    @property
    def quantile_sketch_k(self) -> int: ...
    @property
    def quantile_rank_error(self) -> float: ...
    def distinct_tolerance(self, exact: float, rsds: float) -> int: ...


class MeasureKind:
    """One kind of measure in every layer; subclasses are the kinds."""

    name: ClassVar[str]
    needs_column: ClassVar[bool] = True
    numeric_column: ClassVar[bool] = False
    """Only a numeric column can be measured (sums, extremes, percentiles)."""
    exact_in_speed_layer: ClassVar[bool] = True
    additive: ClassVar[bool] = False
    """The values of disjoint groups add up to their union's (counts, sums)."""
    never_null: ClassVar[bool] = False
    """Every row has a value (counts); the others are null for a key with no value."""
    spark_aggregate: ClassVar[str]
    """The exact aggregate's function in ``pyspark.sql.functions``."""
    micro_batch: ClassVar[str]
    """The Arrow hash aggregation of a micro-batch's values (``list``: then ``sketch``)."""
    combine: ClassVar[str]
    """The Arrow hash aggregation that combines partials (``list``: then ``union``)."""

    @property
    def sketched(self) -> bool:
        """Whether a partial is a serialized sketch (binary) rather than a value."""
        return self.combine == "list"

    def problems(self, measure: MeasureSpec) -> list[str]:
        """What is wrong with ``measure``'s parameters for this kind (none by default)."""
        return [] if measure.percentile is None else [
            f"measure {measure.name!r}: {self.name} takes no percentile"]

    def batch_aggregate(self, measure: MeasureSpec) -> Column:
        """The exact aggregate of ``measure`` (its event-type filter applied) in Spark."""
        from pyspark.sql import functions as F

        aggregate: Column = getattr(F, self.spark_aggregate)(measured_value(measure))
        return aggregate

    def partial_type(self, value_type: pa.DataType) -> pa.DataType:
        """The type of a partial, as Spark types the batch aggregate (one table schema); a
        sketch is its serialized bytes."""
        import pyarrow as pa

        return pa.binary() if self.sketched else value_type

    def final_type(self, value_type: pa.DataType) -> pa.DataType:
        """The type of the value a query shows."""
        return self.partial_type(value_type)

    def sketch(self, values: Iterable[Any], view: SketchSettings, measure: MeasureSpec) -> bytes:
        """A micro-batch's values as a partial (sketched kinds only)."""
        raise NotImplementedError

    def union(self, partials: list[Any], view: SketchSettings, measure: MeasureSpec) -> Any:
        """Partials combined into one (sketched kinds only: the others combine on Arrow);
        absent partials are skipped, and a single one is itself."""
        present = [partial for partial in partials if partial is not None]
        if len(present) <= 1:
            return present[0] if present else None
        return self.merge(present, view)

    def merge(self, sketches: list[bytes], view: SketchSettings) -> bytes:
        """Two or more serialized sketches merged into one (sketched kinds only)."""
        raise NotImplementedError

    def final(self, partial: Any, view: SketchSettings, measure: MeasureSpec) -> Any:
        """What a query shows of a partial: the partial itself for exact kinds."""
        return partial

    def bounds(self, column_bounds: Bounds) -> Bounds:
        """Bounds every value satisfies, given the contract bounds of the measured column."""
        return column_bounds

    def bounds_rule(self, measure: MeasureSpec, lower: Any, upper: Any) -> str:
        return (f"the {self.name} of {measure.column} is within its contract's bounds "
                f"[{lower}, {upper}]")

    def stated_error(self, view: SketchSettings) -> dict[str, float]:
        """The speed layer's stated error for this kind, as the API describes it."""
        return {}

    def reconciliation_rule(self, view: SketchSettings) -> str:
        return "exact: real-time equals batch once the watermark passed"

    def reconciles(self, view: SketchSettings, measure: MeasureSpec, batch: float | None,
                   realtime: float | None, partial: Any, tolerance_rsd: float) -> bool:
        """Whether a closed window's real-time value (``partial``: its partial, for the
        sketched kinds) agrees with the batch layer's exact value."""
        return (realtime or 0.0) == (batch or 0.0)

    def short_of_batch(self, drift: float) -> bool:
        """Whether a real-time value ``drift`` away from batch (real-time minus batch) falls
        short the way events the speed layer dropped as too late would make it."""
        return drift < 0


class _Counting(MeasureKind):
    """The kinds that count (events, distinct values): never null, never negative."""

    never_null = True

    def bounds(self, column_bounds: Bounds) -> Bounds:
        return 0, None

    def bounds_rule(self, measure: MeasureSpec, lower: Any, upper: Any) -> str:
        return f"a {self.name} is non-negative"


class Count(_Counting):
    name = "count"
    additive = True
    needs_column = False
    spark_aggregate = "count"
    micro_batch = "count"
    combine = "sum"

    def partial_type(self, value_type: pa.DataType) -> pa.DataType:
        import pyarrow as pa

        return pa.int64()


class Sum(MeasureKind):
    name = "sum"
    additive = True
    numeric_column = True
    spark_aggregate = "sum"
    micro_batch = "sum"
    combine = "sum"

    def partial_type(self, value_type: pa.DataType) -> pa.DataType:
        import pyarrow as pa

        if pa.types.is_decimal(value_type):  # Spark: 10 more digits
            return pa.decimal128(min(38, value_type.precision + 10), value_type.scale)
        return value_type

    def bounds(self, column_bounds: Bounds) -> Bounds:
        lower = column_bounds[0]  # a sum of values >= m >= 0 is >= m; no upper bound
        return (lower if lower is not None and lower >= 0 else None), None

    def bounds_rule(self, measure: MeasureSpec, lower: Any, upper: Any) -> str:
        return f"a sum of {measure.column} (contract minimum {lower}) is at least {lower}"


class Minimum(MeasureKind):
    name = "min"
    numeric_column = True
    spark_aggregate = "min"
    micro_batch = "min"
    combine = "min"

    def short_of_batch(self, drift: float) -> bool:
        return drift > 0  # a minimum without some events is larger


class Maximum(MeasureKind):
    name = "max"
    numeric_column = True
    spark_aggregate = "max"
    micro_batch = "max"
    combine = "max"


class DistinctCount(_Counting):
    """Exact in batch; a HyperLogLog sketch (DataSketches' HLL_8) in the speed layer, with
    the relative standard error ``view.approx_distinct_rsd``."""

    name = "distinct_count"
    exact_in_speed_layer = False
    spark_aggregate = "count_distinct"
    micro_batch = "list"
    combine = "list"

    def final_type(self, value_type: pa.DataType) -> pa.DataType:
        import pyarrow as pa

        return pa.int64()

    def sketch(self, values: Iterable[Any], view: SketchSettings, measure: MeasureSpec) -> bytes:
        return sketch_of((value for value in values if value is not None), view.sketch_lg_k)

    def merge(self, sketches: list[bytes], view: SketchSettings) -> bytes:
        from datasketches import hll_sketch, hll_union, tgt_hll_type

        combined = hll_union(view.sketch_lg_k)
        for sketch in sketches:
            combined.update(hll_sketch.deserialize(sketch))
        return bytes(combined.get_result(tgt_hll_type.HLL_8).serialize_compact())

    def final(self, partial: Any, view: SketchSettings, measure: MeasureSpec) -> Any:
        return estimate(partial)

    def stated_error(self, view: SketchSettings) -> dict[str, float]:
        return {"speed_layer_rsd": view.approx_distinct_rsd}

    def reconciliation_rule(self, view: SketchSettings) -> str:
        return "sketch: relative drift within the stated error"

    def reconciles(self, view: SketchSettings, measure: MeasureSpec, batch: float | None,
                   realtime: float | None, partial: Any, tolerance_rsd: float) -> bool:
        drift = (realtime or 0.0) - (batch or 0.0)
        return abs(drift) <= view.distinct_tolerance(batch or 0.0, tolerance_rsd)


class ApproxPercentile(MeasureKind):
    """The ``percentile`` (0 < p < 1) of a numeric column: exact in batch (the smallest
    value whose cumulative share reaches p, SQL's ``percentile_disc``), a KLL quantile sketch
    (DataSketches' ``kll_doubles_sketch``, ``view.quantile_sketch_k``) in the speed layer,
    whose answer's rank is within ``view.quantile_rank_error`` of p. A key with up to k
    values is answered exactly by both layers. Values are doubles in both layers."""

    name = "approx_percentile"
    numeric_column = True
    exact_in_speed_layer = False
    micro_batch = "list"
    combine = "list"

    def problems(self, measure: MeasureSpec) -> list[str]:
        if measure.percentile is None or not 0 < measure.percentile < 1:
            return [f"measure {measure.name!r}: {self.name} needs a percentile in (0, 1)"]
        return []

    def batch_aggregate(self, measure: MeasureSpec) -> Column:
        from pyspark.sql import functions as F

        # no DataFrame function for it: SQL's inverse distribution function, which skips
        # nulls like every aggregate (the values the measure's event types filter out)
        value = f"`{measure.column}`"
        if measure.event_types:
            types = ", ".join(f"'{event_type}'" for event_type in measure.event_types)
            value = f"CASE WHEN event_type IN ({types}) THEN {value} END"
        return F.expr(f"percentile_disc({measure.percentile}) WITHIN GROUP "
                      f"(ORDER BY CAST({value} AS DOUBLE))")

    def final_type(self, value_type: pa.DataType) -> pa.DataType:
        import pyarrow as pa

        return pa.float64()

    def sketch(self, values: Iterable[Any], view: SketchSettings, measure: MeasureSpec) -> bytes:
        from datasketches import kll_doubles_sketch

        sketch = kll_doubles_sketch(view.quantile_sketch_k)
        for value in values:
            if value is not None:
                sketch.update(float(value))
        return bytes(sketch.serialize())

    def merge(self, sketches: list[bytes], view: SketchSettings) -> bytes:
        from datasketches import kll_doubles_sketch

        combined = kll_doubles_sketch.deserialize(sketches[0])
        for sketch in sketches[1:]:
            combined.merge(kll_doubles_sketch.deserialize(sketch))
        return bytes(combined.serialize())

    def final(self, partial: Any, view: SketchSettings, measure: MeasureSpec) -> Any:
        from datasketches import kll_doubles_sketch

        if partial is None:
            return None
        sketch = kll_doubles_sketch.deserialize(partial)
        return None if sketch.is_empty() else sketch.get_quantile(measure.percentile, True)

    def stated_error(self, view: SketchSettings) -> dict[str, float]:
        return {"speed_layer_rank_error": view.quantile_rank_error}

    def reconciliation_rule(self, view: SketchSettings) -> str:
        return (f"sketch: the batch value's rank in the real-time sketch is within "
                f"{view.quantile_rank_error:.4f} of the percentile")

    def reconciles(self, view: SketchSettings, measure: MeasureSpec, batch: float | None,
                   realtime: float | None, partial: Any, tolerance_rsd: float) -> bool:
        """The exact batch value ``b`` is the smallest value whose cumulative share reaches
        p: the sketch's share of values below ``b`` and up to ``b`` bracket p, each within
        the sketch's rank error."""
        from datasketches import kll_doubles_sketch

        if batch is None or partial is None:
            return batch is None and realtime is None
        sketch = kll_doubles_sketch.deserialize(partial)
        error, p = view.quantile_rank_error, measure.percentile
        assert p is not None, "problems() requires a percentile"
        below, up_to = float(sketch.get_rank(batch, False)), float(sketch.get_rank(batch, True))
        return below - error <= p <= up_to + error

    def short_of_batch(self, drift: float) -> bool:
        return drift != 0  # dropped events may move a percentile either way


def measured_value(measure: MeasureSpec) -> Column:
    """The values ``measure`` aggregates: its column (1 per event for a count), null for
    the events its ``event_types`` leave out."""
    from pyspark.sql import functions as F

    value = F.lit(1) if measure.column is None else F.col(measure.column)
    if measure.event_types:
        value = F.when(F.col("event_type").isin(measure.event_types), value)
    return value


MEASURE_KINDS: dict[str, MeasureKind] = {kind.name: kind for kind in (
    Count(), Sum(), Minimum(), Maximum(), DistinctCount(), ApproxPercentile())}
"""Every measure kind by name: what a view definition's ``kind`` may say."""


def sketch_of(values: Iterable[object], lg_k: int) -> bytes:
    """The serialized HLL sketch of ``values``: DataSketches' HLL_8 format, which Spark's
    ``hll_sketch_*`` functions and every DataSketches library read."""
    from datasketches import hll_sketch, tgt_hll_type

    sketch = hll_sketch(lg_k, tgt_hll_type.HLL_8)
    for value in values:
        sketch.update(value)
    return bytes(sketch.serialize_compact())


def estimate(sketch: bytes | None) -> int | None:
    """The distinct count a serialized HLL sketch estimates, as a whole number."""
    from datasketches import hll_sketch

    return None if sketch is None else round(hll_sketch.deserialize(sketch).get_estimate())


def quantile_rank_error(k: int) -> float:
    """The normalized rank error of a KLL sketch of parameter ``k`` (single quantile, 99 %
    confidence), as DataSketches states it: 0.0133 for k = 200."""
    from datasketches import kll_doubles_sketch

    return float(kll_doubles_sketch.get_normalized_rank_error(k, False))

