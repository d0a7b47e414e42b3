"""Both layers agree on every expression: random expressions of the view language over
every column type, on random rows (NULLs, exact decimals, empty and non-ASCII strings, edge
instants), evaluated by Spark (the batch layer's form) and on Arrow (the speed layer's),
row for row."""

from __future__ import annotations

import random
from collections import Counter
from datetime import UTC
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pytest

from lambdalake.views.expressions import (
    Expression,
    ExpressionError,
    SqlType,
    evaluate_arrow,
    to_spark,
    typed,
)
from tests.support.expression_cases import COLUMNS, ExpressionWriter, random_rows

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

TYPES = {name: SqlType.of(ddl) for name, ddl in COLUMNS.items()}


def comparable(value: Any) -> Any:
    """A value as both layers' answers are compared: an instant in UTC, NaN as itself."""
    if hasattr(value, "tzinfo") and value.tzinfo is not None:
        return value.astimezone(UTC)
    if isinstance(value, float) and value != value:
        return "NaN"
    return value


def expressions(seed: int, count: int) -> tuple[list[Expression], Counter]:
    """``count`` typed expressions, and the typer's refusals by reason (a decimal that
    would round is refused: both layers could not agree on it)."""
    writer, found, refused = ExpressionWriter(random.Random(seed)), [], Counter()
    while len(found) < count:
        text = writer.any(depth=4)
        try:
            found.append(typed(text, TYPES))
        except ExpressionError as error:
            refused[str(error).split(": ", 1)[-1][:40]] += 1
    return found, refused


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_spark_and_arrow_give_every_expression_the_same_value_on_every_row(
    spark: SparkSession, seed: int,
) -> None:
    rows = random_rows(random.Random(seed), 300)
    cases, refused = expressions(seed, 200)
    assert sum(refused.values()) < len(cases) / 2, refused
    frame = spark.createDataFrame(rows.to_pandas(), schema=", ".join(
        ["id BIGINT", *(f"{name} {ddl}" for name, ddl in COLUMNS.items())]))
    batch = frame.select("id", *(to_spark(e).alias(f"e{i}") for i, e in enumerate(cases)))
    answers = batch.toArrow().sort_by("id")
    assert answers.column("id").to_pylist() == rows.column("id").to_pylist()
    kinds = Counter(e.type.name for e in cases)
    assert all(kinds[name] for name in ("BIGINT", "DECIMAL", "DOUBLE", "BOOLEAN", "STRING",
                                        "TIMESTAMP")), kinds
    for i, expression in enumerate(cases):
        speed = evaluate_arrow(expression, rows)
        assert speed.type == expression.type.arrow(), expression.text
        spark_values = [comparable(v) for v in answers.column(f"e{i}").to_pylist()]
        arrow_values = [comparable(v) for v in speed.to_pylist()]
        differing = [(row, s, a) for row, (s, a) in enumerate(zip(spark_values, arrow_values,
                                                                  strict=True)) if s != a]
        assert not differing, (expression.text, expression.type.ddl, differing[:3],
                               rows.slice(differing[0][0], 1).to_pylist())


def test_the_rows_have_what_the_expressions_must_meet() -> None:
    rows = random_rows(random.Random(1), 300)
    for name in COLUMNS:
        column = rows.column(name)
        assert column.null_count > 0, name
    assert "" in rows.column("s").to_pylist() and "straße" in rows.column("s").to_pylist()
    assert pa.compute.min(rows.column("t")).as_py().year < 1970
