"""The measure kinds: what each kind of measure means in every layer, defined once.

A view's measures name a kind (``count``, ``sum``, ``min``, ``max``, ``distinct_count``,
``approx_percentile``, ``avg``, ``variance``, ``stddev``, ``first``, ``last``,
``first_k``, ``last_k``, ``top_k``). Like Chronon's aggregators and
Summingbird's monoids, a kind is one object that knows

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

import math
from collections.abc import Iterable
from decimal import (
    MAX_EMAX,
    MAX_PREC,
    MIN_EMIN,
    Context,
    Decimal,
    Inexact,
    InvalidOperation,
    localcontext,
)
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame

Bounds = tuple[int | float | None, int | float | None]
PARAMETERS = ("percentile", "k")
"""The parameters a measure may give its kind (``MeasureSpec``)."""


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
    @property
    def k(self) -> int | None: ...


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
    @property
    def top_k_lg_map_size(self) -> int: ...
    @property
    def top_k_error(self) -> float: ...
    def distinct_tolerance(self, exact: float, rsds: float) -> int: ...


class MeasureKind:
    """One kind of measure in every layer; subclasses are the kinds."""

    name: ClassVar[str]
    needs_column: ClassVar[bool] = True
    numeric_column: ClassVar[bool] = False
    """Only a numeric column can be measured (sums, extremes, percentiles)."""
    text_column: ClassVar[bool] = False
    """Only a STRING column can be measured (``top_k``: its sketch counts strings)."""
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
    def merged_by_kind(self) -> bool:
        """Whether partials are combined by the kind's ``union`` (a sketch or a kind's
        moments, as bytes; an ordered kind's chosen values) rather than by Arrow."""
        return self.combine == "list"

    ordered: ClassVar[bool] = False
    """A value of the kind depends on the events' order (``_Ordered``): the layers measure
    each value with its event's place in that order (``ORDER``)."""

    apart: ClassVar[bool] = False
    """The batch layer computes the kind in an aggregation of its own (``batch_apart``),
    joined to the view's rows by key, not as one aggregate of the view's grouping."""

    takes: ClassVar[tuple[str, ...]] = ()
    """The measure's parameters the kind reads (``percentile``, ``k``): any other one a
    definition gives is refused."""

    def problems(self, measure: MeasureSpec) -> list[str]:
        """What is wrong with ``measure``'s parameters for this kind: one it does not take,
        or what ``parameter_problems`` finds in those it takes."""
        refused = [f"measure {measure.name!r}: {self.name} takes no {parameter}"
                   for parameter in PARAMETERS
                   if parameter not in self.takes and getattr(measure, parameter) is not None]
        return refused + self.parameter_problems(measure)

    def parameter_problems(self, measure: MeasureSpec) -> list[str]:
        """What is wrong with the parameters the kind takes (none by default)."""
        return []

    def batch_aggregate(self, measure: MeasureSpec, value: str, value_type: str) -> Column:
        """The exact aggregate in Spark of the column ``value`` (of Spark type
        ``value_type``, as ``DataFrame.dtypes`` names it): the measure's values, null for
        the events its filters leave out (``views.aggregate.measured_values``)."""
        from pyspark.sql import functions as F

        aggregate: Column = getattr(F, self.spark_aggregate)(F.col(value))
        return aggregate

    def batch_apart(self, measure: MeasureSpec, values: DataFrame, key: list[str],
                    value: str) -> DataFrame:
        """The exact value (column ``measure.name``) for every key (columns ``key``) of
        ``values``, the view's events with the measure's values in column ``value``
        (``apart`` kinds only)."""
        raise NotImplementedError

    def partial_type(self, value_type: pa.DataType) -> pa.DataType:
        """The type of a partial of values of ``value_type`` (the measured column's, or for
        an ordered kind the struct of each value and its place), as Spark types the batch
        aggregate (one table schema); a sketch is its serialized bytes."""
        import pyarrow as pa

        return pa.binary() if self.merged_by_kind else value_type

    def final_type(self, value_type: pa.DataType) -> pa.DataType:
        """The type of the value a query shows."""
        return self.partial_type(value_type)

    def sketch(self, values: Iterable[Any], view: SketchSettings, measure: MeasureSpec) -> Any:
        """A micro-batch's values as a partial (``merged_by_kind`` kinds only)."""
        raise NotImplementedError

    def union(self, partials: list[Any], view: SketchSettings, measure: MeasureSpec) -> Any:
        """Partials combined into one (``merged_by_kind`` kinds only: the others combine on
        Arrow); absent partials are skipped, and a single one is itself."""
        present = [partial for partial in partials if partial is not None]
        if len(present) <= 1:
            return present[0] if present else None
        return self.merge(present, view)

    def merge(self, sketches: list[Any], view: SketchSettings) -> Any:
        """Two or more partials merged into one (``merged_by_kind`` kinds only)."""
        raise NotImplementedError

    def final(self, partial: Any, view: SketchSettings, measure: MeasureSpec) -> Any:
        """What a query shows of a partial: the partial itself for exact kinds."""
        return partial

    def bounds(self, column_bounds: Bounds) -> Bounds:
        """Bounds every value satisfies, given the contract bounds of the measured column."""
        return column_bounds

    def bounds_rule(self, measure: MeasureSpec, lower: Any, upper: Any) -> str:
        """The rule the view gate's bounds check of this kind states, from the contract's
        ``lower`` and ``upper`` bound of the measure's column."""
        return (f"the {self.name} of {measure.column} is within its contract's bounds "
                f"[{lower}, {upper}]")

    def stated_error(self, view: SketchSettings) -> dict[str, float]:
        """The speed layer's stated error for this kind, as the API describes it."""
        return {}

    def reconciliation_rule(self, view: SketchSettings) -> str:
        """How a closed window's real-time value must agree with the batch layer's: the
        rule the serving DAG's reconciliation states beside each drift it reports."""
        return "exact: real-time equals batch once the watermark passed"

    def reconciles(self, view: SketchSettings, measure: MeasureSpec, batch: Any,
                   realtime: Any, partial: Any, tolerance_rsd: float) -> bool:
        """Whether a closed window's real-time value (``partial``: its partial, for the
        ``merged_by_kind`` kinds) agrees with the batch layer's exact value (numbers as
        floats)."""
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

    takes = ("percentile",)

    def parameter_problems(self, measure: MeasureSpec) -> list[str]:
        if measure.percentile is None or not 0 < measure.percentile < 1:
            return [f"measure {measure.name!r}: {self.name} needs a percentile in (0, 1)"]
        return []

    def batch_aggregate(self, measure: MeasureSpec, value: str, value_type: str) -> Column:
        from pyspark.sql import functions as F

        # no DataFrame function for it: SQL's inverse distribution function, which skips
        # nulls like every aggregate (the values the measure's filters leave out)
        return F.expr(f"percentile_disc({measure.percentile}) WITHIN GROUP "
                      f"(ORDER BY CAST(`{value}` AS DOUBLE))")

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


class _Moments(MeasureKind):
    """The kinds computed from a column's count, sum and sum of squares: the mean, the
    sample variance and the sample standard deviation.

    Both layers add the values exactly and round once, at the end, so a re-run gives the
    same bits (a double's sum depends on the order of its additions, and Spark's order
    between partitions is not fixed) and the layers agree to the last few bits. The batch
    layer sums a DECIMAL or whole column in exact decimals, and adds a DOUBLE column's
    values in sorted order (two passes: the mean, then the squared deviations), which holds
    a group's values in memory. The speed layer's partial is the exact count, sum and sum
    of squares (``pack_moments``): any values, any grouping, one answer."""

    numeric_column = True
    exact_in_speed_layer = False
    micro_batch = "list"
    combine = "list"
    fewest_values: ClassVar[int] = 1

    def partial_type(self, value_type: pa.DataType) -> pa.DataType:
        import pyarrow as pa

        return pa.binary()

    def final_type(self, value_type: pa.DataType) -> pa.DataType:
        import pyarrow as pa

        return pa.float64()

    def batch_aggregate(self, measure: MeasureSpec, value: str, value_type: str) -> Column:
        from pyspark.sql import functions as F

        values = F.col(value)
        if value_type in ("double", "float"):
            ordered = F.array_sort(F.collect_list(values.cast("double")))
            count = F.size(ordered)
            mean = F.aggregate(ordered, F.lit(0.0), lambda total, x: total + x) / count
            # the mean rides in the fold's state: a lambda reading ``mean`` itself would
            # compute it again for every value
            state = F.aggregate(
                ordered, F.struct(mean.alias("mean"), F.lit(0.0).alias("squares")),
                lambda s, x: F.struct(s["mean"].alias("mean"), (s["squares"] + (
                    x - s["mean"]) * (x - s["mean"])).alias("squares")))
            squares = state["squares"]
        else:
            exact = values if value_type.startswith("decimal") else values.cast("decimal(20,0)")
            count = F.count(exact)
            total = F.sum(exact)
            mean = total.cast("double") / count
            # n * sum(x^2) - sum(x)^2, exact in decimal, is n times the squared deviations
            squares = ((count.cast("decimal(20,0)") * F.sum(exact * exact) - total * total)
                       .cast("double") / count)
        return F.when(count >= self.fewest_values, self.of_spark_moments(count, mean, squares))

    def of_spark_moments(self, count: Column, mean: Column, squares: Column) -> Column:
        """The kind's value in Spark, of ``count`` values with ``mean`` and sum of squared
        deviations ``squares`` (``of_moments``, on columns)."""
        raise NotImplementedError

    def sketch(self, values: Iterable[Any], view: SketchSettings, measure: MeasureSpec) -> bytes:
        present = [Decimal(value) for value in values if value is not None]  # exact, floats too
        with localcontext(_EXACT):
            return pack_moments(len(present), sum(present, Decimal(0)),
                                sum((value * value for value in present), Decimal(0)))

    def merge(self, sketches: list[bytes], view: SketchSettings) -> bytes:
        parts = [unpack_moments(sketch) for sketch in sketches]
        with localcontext(_EXACT):
            return pack_moments(sum(p[0] for p in parts), sum((p[1] for p in parts), Decimal(0)),
                                sum((p[2] for p in parts), Decimal(0)))

    def final(self, partial: Any, view: SketchSettings, measure: MeasureSpec) -> Any:
        if partial is None:
            return None
        count, total, total_of_squares = unpack_moments(partial)
        if count < self.fewest_values:
            return None
        with localcontext(_EXACT):  # rounded where the batch layer rounds: at the end
            squares = float(count * total_of_squares - total * total) / count
        return self.of_moments(count, float(total) / count, squares)

    def of_moments(self, count: int, mean: float, squares: float) -> float:
        """The kind's value of ``count`` values (at least ``fewest_values``) with ``mean``
        and sum of squared deviations ``squares``."""
        raise NotImplementedError

    def stated_error(self, view: SketchSettings) -> dict[str, float]:
        return {"speed_layer_relative_error": RELATIVE_ERROR}

    def reconciliation_rule(self, view: SketchSettings) -> str:
        return f"exact sums, rounded at the end: relative drift within {RELATIVE_ERROR}"

    def reconciles(self, view: SketchSettings, measure: MeasureSpec, batch: float | None,
                   realtime: float | None, partial: Any, tolerance_rsd: float) -> bool:
        if batch is None or realtime is None:
            return batch is None and realtime is None
        return math.isclose(realtime, batch, rel_tol=RELATIVE_ERROR, abs_tol=RELATIVE_ERROR)

    def short_of_batch(self, drift: float) -> bool:
        return drift != 0  # dropped events may move a mean or a spread either way


class Average(_Moments):
    """The mean of a numeric column's values (null where there are none)."""

    name = "avg"

    def of_spark_moments(self, count: Column, mean: Column, squares: Column) -> Column:
        return mean

    def of_moments(self, count: int, mean: float, squares: float) -> float:
        return mean


class Variance(_Moments):
    """The sample variance (n - 1; null for fewer than two values, as Spark's)."""

    name = "variance"
    fewest_values = 2

    def bounds(self, column_bounds: Bounds) -> Bounds:
        return 0, None

    def bounds_rule(self, measure: MeasureSpec, lower: Any, upper: Any) -> str:
        return "a variance is non-negative"

    def of_spark_moments(self, count: Column, mean: Column, squares: Column) -> Column:
        from pyspark.sql import functions as F

        return F.greatest(squares, F.lit(0.0)) / (count - 1)

    def of_moments(self, count: int, mean: float, squares: float) -> float:
        return max(squares, 0.0) / (count - 1)


class StandardDeviation(Variance):
    """The sample standard deviation: the square root of ``variance``."""

    name = "stddev"

    def bounds_rule(self, measure: MeasureSpec, lower: Any, upper: Any) -> str:
        return "a standard deviation is non-negative"

    def of_spark_moments(self, count: Column, mean: Column, squares: Column) -> Column:
        from pyspark.sql import functions as F

        return F.sqrt(super().of_spark_moments(count, mean, squares))

    def of_moments(self, count: int, mean: float, squares: float) -> float:
        return math.sqrt(super().of_moments(count, mean, squares))


KAFKA_ORDER = ("kafka_timestamp", "topic", "partition", "offset")
"""The order records reached Kafka in (bronze's columns): batch deduplication keeps the
first copy of an event by it, and the ordered kinds break ties of event time by it."""
ORDER = ("at", *KAFKA_ORDER)
"""An ordered kind's order of events: by event time (``at``), then by Kafka order. Each
measured value travels as a struct of these fields and ``value`` (both layers build it:
``views.aggregate.measured_values``, ``speed.partials.ordered_values``), compared field by
field."""


class _Ordered(MeasureKind):
    """The kinds that pick values by the events' order: ``first`` and ``last`` (one value)
    and ``first_k`` and ``last_k`` (the ``k`` oldest or newest, in that order).

    Exact in both layers: the batch layer takes the smallest or largest structs of a group
    (``min``/``max``, or the sorted list's first k), the speed layer's partial is the same
    struct (or list of them) for a micro-batch's values, and partials combine by keeping the
    extremes again. A null value is skipped, as every aggregate skips it."""

    ordered = True
    micro_batch = "list"
    combine = "list"
    newest: ClassVar[bool]
    """``last``/``last_k`` (the newest), or ``first``/``first_k`` (the oldest)."""

    def ranked(self, values: Iterable[dict[str, Any] | None]) -> list[dict[str, Any]]:
        """The present values, in the kind's order (newest first for ``last``)."""
        present = [value for value in values if value is not None]
        return sorted(present, key=lambda value: tuple(value[f] for f in ORDER),
                      reverse=self.newest)

    def sketch(self, values: Iterable[Any], view: SketchSettings, measure: MeasureSpec) -> Any:
        return self.kept(self.ranked(values), measure)

    def kept(self, ranked: list[dict[str, Any]], measure: MeasureSpec) -> Any:
        """What a partial keeps of values in the kind's order."""
        raise NotImplementedError

    def reconciles(self, view: SketchSettings, measure: MeasureSpec, batch: Any,
                   realtime: Any, partial: Any, tolerance_rsd: float) -> bool:
        return bool(batch == realtime)  # text and lists too: no number to default to 0

    def short_of_batch(self, drift: float) -> bool:
        return True  # an event dropped as too late may have been any of the chosen ones


class _OneByOrder(_Ordered):
    """``first``/``last``: the value of the oldest or newest event with one."""

    def batch_aggregate(self, measure: MeasureSpec, value: str, value_type: str) -> Column:
        from pyspark.sql import functions as F

        extreme = F.max(F.col(value)) if self.newest else F.min(F.col(value))
        return extreme["value"]

    def partial_type(self, value_type: pa.DataType) -> pa.DataType:
        return value_type

    def final_type(self, value_type: pa.DataType) -> pa.DataType:
        return value_type.field("value").type

    def kept(self, ranked: list[dict[str, Any]], measure: MeasureSpec) -> Any:
        return ranked[0] if ranked else None

    def merge(self, sketches: list[Any], view: SketchSettings) -> Any:
        return self.ranked(sketches)[0]

    def final(self, partial: Any, view: SketchSettings, measure: MeasureSpec) -> Any:
        return None if partial is None else partial["value"]


class _SomeByOrder(_Ordered):
    """``first_k``/``last_k``: the values of the ``k`` oldest or newest events with one, in
    that order (a list; empty where no event has a value)."""

    takes = ("k",)

    def parameter_problems(self, measure: MeasureSpec) -> list[str]:
        return k_problems(self, measure)

    def batch_aggregate(self, measure: MeasureSpec, value: str, value_type: str) -> Column:
        from pyspark.sql import functions as F

        assert measure.k is not None, "problems() requires a k"
        ranked = F.sort_array(F.collect_list(F.col(value)), asc=not self.newest)
        return F.transform(F.slice(ranked, 1, measure.k), lambda chosen: chosen["value"])

    def partial_type(self, value_type: pa.DataType) -> pa.DataType:
        import pyarrow as pa

        return pa.list_(value_type)

    def final_type(self, value_type: pa.DataType) -> pa.DataType:
        import pyarrow as pa

        return pa.list_(value_type.value_type.field("value").type)

    def kept(self, ranked: list[dict[str, Any]], measure: MeasureSpec) -> Any:
        return ranked[:measure.k]

    def union(self, partials: list[Any], view: SketchSettings, measure: MeasureSpec) -> Any:
        present = [partial for partial in partials if partial is not None]
        if not present:
            return None
        return self.kept(self.ranked(v for partial in present for v in partial), measure)

    def final(self, partial: Any, view: SketchSettings, measure: MeasureSpec) -> Any:
        return None if partial is None else [chosen["value"] for chosen in partial]

    def bounds(self, column_bounds: Bounds) -> Bounds:
        return None, None  # a list: its values are each within the column's bounds


class First(_OneByOrder):
    name = "first"
    newest = False


class Last(_OneByOrder):
    name = "last"
    newest = True


class FirstK(_SomeByOrder):
    name = "first_k"
    newest = False


class LastK(_SomeByOrder):
    name = "last_k"
    newest = True


MAX_K = 100
"""The most values a ``first_k``, ``last_k`` or ``top_k`` keeps: a real-time partial of the
ordered kinds holds them all."""


def k_problems(kind: MeasureKind, measure: MeasureSpec) -> list[str]:
    """What is wrong with the ``k`` of a kind that keeps ``k`` values."""
    if measure.k is None or not 1 <= measure.k <= MAX_K:
        return [f"measure {measure.name!r}: {kind.name} needs a k from 1 to {MAX_K}"]
    return []


class TopK(MeasureKind):
    """The ``k`` most frequent values of a STRING column, each with how many events have
    it: a list of ``{value, count}``, most counted first, equal counts by value (ascending;
    empty where no event has a value).

    Exact in the batch layer: each value counted per key, ranked, the first ``k`` kept
    (``batch_apart``). The speed layer's partial is a frequent-items sketch (DataSketches'
    ``frequent_strings_sketch`` with a map of 2^``view.top_k_lg_map_size`` counters); its
    final value is the k values it estimates most frequent, with those estimates. Each
    estimate is within ``view.top_k_error`` × N of the value's count, N the values the
    sketch counted (the sketch's a-priori error; merging adds none); a key with up to
    0.75 × 2^lg distinct values (768 at the default 10) is counted exactly."""

    name = "top_k"
    text_column = True
    exact_in_speed_layer = False
    apart = True
    micro_batch = "list"
    combine = "list"
    takes = ("k",)

    def parameter_problems(self, measure: MeasureSpec) -> list[str]:
        return k_problems(self, measure)

    def batch_apart(self, measure: MeasureSpec, values: DataFrame, key: list[str],
                    value: str) -> DataFrame:
        """Counts per key and value (a null value counts 0, which keeps a key without
        values, listed empty), ranked within each key, the first k collected in rank order:
        an aggregation of the values' counts, which Spark spills, not a group's values held
        in memory."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        assert measure.k is not None, "problems() requires a k"
        counts = values.groupBy(*key, value).agg(F.count(value).alias("_count"))
        rank = F.row_number().over(
            Window.partitionBy(*key).orderBy(F.desc("_count"), F.asc(value)))
        kept = counts.withColumn("_rank", rank).where(F.col("_rank") <= measure.k)
        chosen = F.struct("_rank", F.col(value).alias("value"), F.col("_count").alias("count"))
        listed = F.array_sort(F.collect_list(F.when(F.col("_count") > 0, chosen)))
        return kept.groupBy(*key).agg(F.transform(listed, lambda c: F.struct(
            c["value"].alias("value"), c["count"].alias("count"))).alias(measure.name))

    def final_type(self, value_type: pa.DataType) -> pa.DataType:
        import pyarrow as pa

        return pa.list_(pa.struct([("value", pa.string()), ("count", pa.int64())]))

    def sketch(self, values: Iterable[Any], view: SketchSettings, measure: MeasureSpec) -> bytes:
        from datasketches import frequent_strings_sketch

        sketch = frequent_strings_sketch(view.top_k_lg_map_size)
        for value in values:
            if value is not None:
                sketch.update(value)
        return bytes(sketch.serialize())

    def merge(self, sketches: list[bytes], view: SketchSettings) -> bytes:
        from datasketches import frequent_strings_sketch

        combined = frequent_strings_sketch.deserialize(sketches[0])
        for sketch in sketches[1:]:
            combined.merge(frequent_strings_sketch.deserialize(sketch))
        return bytes(combined.serialize())

    def final(self, partial: Any, view: SketchSettings, measure: MeasureSpec) -> Any:
        from datasketches import frequent_items_error_type, frequent_strings_sketch

        if partial is None:
            return None
        assert measure.k is not None, "problems() requires a k"
        # every value the sketch tracks (an upper bound above 0), with its estimate
        tracked = frequent_strings_sketch.deserialize(partial).get_frequent_items(
            frequent_items_error_type.NO_FALSE_NEGATIVES, 0)
        ranked = sorted(((value, estimate) for value, estimate, _, _ in tracked),
                        key=lambda pair: (-pair[1], pair[0]))
        return [{"value": value, "count": count} for value, count in ranked[:measure.k]]

    def bounds(self, column_bounds: Bounds) -> Bounds:
        return None, None  # a list of text values and their counts

    def stated_error(self, view: SketchSettings) -> dict[str, float]:
        return {"speed_layer_count_error": view.top_k_error}

    def reconciliation_rule(self, view: SketchSettings) -> str:
        return (f"sketch: each count within {view.top_k_error:.4f} x the key's counted values "
                f"of the batch count, and a value one layer lists and the other does not "
                f"within that of the other's k-th count")

    def reconciles(self, view: SketchSettings, measure: MeasureSpec, batch: Any,
                   realtime: Any, partial: Any, tolerance_rsd: float) -> bool:
        """The sketch's guarantee, read against batch's exact list: every estimate of a
        value batch lists is within the tolerance (``top_k_error`` × N, N the sketch's
        total) of its count; a value only real-time lists has a true count of at most
        batch's k-th (0 if batch lists fewer than k), so its estimate is within the
        tolerance of that; a value only batch lists was estimated at most real-time's k-th
        (0 if it lists fewer: the sketch lost the value, whose count is then within the
        tolerance), so its count is within the tolerance of that. An exact answer agrees."""
        from datasketches import frequent_strings_sketch

        weight = 0 if partial is None else frequent_strings_sketch.deserialize(partial).total_weight
        tolerance = view.top_k_error * weight
        exact = {chosen["value"]: chosen["count"] for chosen in batch or []}
        estimated = {chosen["value"]: chosen["count"] for chosen in realtime or []}

        def kth(listed: dict[str, int]) -> int:
            return min(listed.values()) if len(listed) == measure.k else 0

        return (all(abs(count - exact[value]) <= tolerance
                    for value, count in estimated.items() if value in exact)
                and all(count <= kth(exact) + tolerance
                        for value, count in estimated.items() if value not in exact)
                and all(count <= kth(estimated) + tolerance
                        for value, count in exact.items() if value not in estimated))

    def short_of_batch(self, drift: float) -> bool:
        return True  # an event dropped as too late may have been of any value


RELATIVE_ERROR = 1e-9
"""How far the speed layer's mean, variance or standard deviation may be from the batch
layer's, relative to it. Of a DECIMAL or whole column both are exact until rounded (a few
units in the last place apart); of a DOUBLE column the batch layer's sum in sorted order
rounds at each step: within this unless the values' spread is below a millionth of their
mean."""

_EXACT = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN, traps=[Inexact, InvalidOperation])
"""Decimal arithmetic that never rounds (and says so if it would)."""


def pack_moments(count: int, total: Decimal, total_of_squares: Decimal) -> bytes:
    """A moments partial: the count, the exact sum and the exact sum of squares, as text."""
    return f"{count} {total} {total_of_squares}".encode()


def unpack_moments(partial: bytes) -> tuple[int, Decimal, Decimal]:
    count, total, total_of_squares = partial.decode().split()
    return int(count), Decimal(total), Decimal(total_of_squares)


MEASURE_KINDS: dict[str, MeasureKind] = {kind.name: kind for kind in (
    Count(), Sum(), Minimum(), Maximum(), DistinctCount(), ApproxPercentile(), Average(),
    Variance(), StandardDeviation(), First(), Last(), FirstK(), LastK(), TopK())}
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


def top_k_error(lg_map_size: int) -> float:
    """The a-priori error of a frequent-items sketch of 2^``lg_map_size`` counters, as a
    fraction of the values it counted (DataSketches: 3.5 / 2^lg, 0.0034 for 10)."""
    from datasketches import frequent_strings_sketch

    return float(frequent_strings_sketch.get_epsilon_for_lg_size(lg_map_size))

