"""The batch layer's averages, variances and standard deviations: the same bits whatever
order Spark adds the values in (a re-run changes no row), and the exact statistics of the
values (computed on fractions) to the last few bits, for whole, decimal and double columns."""

from __future__ import annotations

import math
import random
import statistics
from decimal import Decimal
from fractions import Fraction
from typing import TYPE_CHECKING

import pytest

from lambdalake.views.measures import MEASURE_KINDS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

EXACT = {"avg": statistics.mean, "variance": statistics.variance,
         "stddev": lambda values: math.sqrt(statistics.variance(values))}


def moments(frame: DataFrame, column: str, value_type: str) -> dict[str, list[float | None]]:
    """Each moment kind of ``column`` per group ``g``, in the order of ``g``."""
    aggregates = [MEASURE_KINDS[kind].batch_aggregate(None, column, value_type).alias(kind)
                  for kind in EXACT]
    rows = frame.groupBy("g").agg(*aggregates).orderBy("g").collect()
    return {kind: [row[kind] for row in rows] for kind in EXACT}


@pytest.mark.parametrize(("ddl", "value_type"), [
    ("BIGINT", "bigint"), ("DECIMAL(18,2)", "decimal(18,2)"), ("DOUBLE", "double")])
def test_moments_are_the_same_bits_in_any_order_and_the_exact_statistic(
    spark: SparkSession, ddl: str, value_type: str,
) -> None:
    generator = random.Random(5)

    def value() -> object:
        if generator.random() < 0.1:
            return None
        cents = generator.randint(10**8, 10**8 + 5000)  # a large mean, a small spread
        return {"BIGINT": cents, "DECIMAL(18,2)": Decimal(cents) / 100,
                "DOUBLE": cents / 7}[ddl]

    rows = [(g, value()) for g in range(4) for _ in range(2000)] + [(4, None), (5, value())]
    frame = spark.createDataFrame(rows, f"g INT, v {ddl}")
    answers = [moments(frame.repartition(partitions, "v").sortWithinPartitions(order), "v",
                       value_type)
               for partitions, order in ((1, "v"), (7, "g"), (3, frame.v.desc()))]
    assert answers[0] == answers[1] == answers[2]
    for kind, statistic in EXACT.items():
        for g, answer in enumerate(answers[0][kind]):
            present = [Fraction(v) for group, v in rows if group == g and v is not None]
            if len(present) < (1 if kind == "avg" else 2):
                assert answer is None, (kind, g)
                continue
            exact = float(statistic(present))
            assert math.isclose(answer, exact, rel_tol=1e-12), (kind, g, answer, exact)
