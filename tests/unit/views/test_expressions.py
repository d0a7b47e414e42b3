"""The view language's expressions: what is refused and why, the types they have, and their
values on the speed layer's Arrow path against values worked out by hand (the Spark path is
held to the same values by ``tests/integration/views/test_expressions_agree.py``)."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from lambdalake.contracts.registry import ContractRegistry
from lambdalake.views.definition import ViewDefinition, ViewError, load_views
from lambdalake.views.expressions import ExpressionError, SqlType, evaluate_arrow, typed

TYPES = {name: SqlType.of(ddl) for name, ddl in {
    "amount": "DECIMAL(18,2)", "quantity": "BIGINT", "ratio": "DOUBLE", "currency": "STRING",
    "paid": "BOOLEAN", "occurred_at": "TIMESTAMP"}.items()}
# fixed date: a moment for hand-worked values; nothing is produced
MOMENT = datetime(2026, 12, 3, 14, 37, 12, 500, tzinfo=UTC)  # a Thursday


def rows(**columns: list[Any]) -> pa.Table:
    """A micro-batch with the columns given, typed as ``TYPES`` says."""
    return pa.table({name: pa.array(values, TYPES[name].arrow())
                     for name, values in columns.items()})


def values(text: str, table: pa.Table) -> list[Any]:
    return evaluate_arrow(typed(text, TYPES), table).to_pylist()


@pytest.mark.parametrize(("text", "problem"), [
    ("SUM(amount) > 10", "aggregate SUM(amount) inside an expression"),
    ("RAND() < 0.5", "RAND() is not deterministic"),
    ("occurred_at < CURRENT_TIMESTAMP()", "is not deterministic"),
    ("price > 10", "unknown column 'price' (known: amount, currency"),
    ("currency + 1", "currency is STRING, not a number"),
    ("paid AND quantity", "quantity is BIGINT, not BOOLEAN"),
    ("currency = 1", "no common type for STRING, BIGINT"),
    ("quantity IN (SELECT 1)", "IN takes a list of literals"),
    ("quantity IN (1, amount)", "IN takes non-NULL literals"),
    ("CAST(amount AS STRING) = 'x'", "the only CAST is a TIMESTAMP '...' literal"),
    ("ROUND(ratio, 1) > 0", "ROUND of a DOUBLE"),
    ("DATE_TRUNC('millennium', occurred_at) > occurred_at", "DATE_TRUNC to 'MILLENNIUM'"),
    ("DATE_TRUNC('day', amount) > occurred_at", "DATE_TRUNC of DECIMAL(18,2)"),
    ("SUBSTRING(currency, quantity) = 'x'", "SUBSTRING's start must be a whole number"),
    ("amount * amount * amount * amount > 0", "would be rounded to fit 38 digits"),
    ("e.amount > 0", "columns are not qualified"),
    ("ROW_NUMBER() OVER (ORDER BY amount) = 1", "is not in the view language"),
    ("amount >", "does not parse"),
    ("NULL", "an expression needs a type"),
])
def test_an_expression_outside_the_language_is_refused_with_the_reason(
    text: str, problem: str,
) -> None:
    with pytest.raises(ExpressionError) as raised:
        typed(text, TYPES)
    assert problem in str(raised.value) and repr(text)[1:-1] in str(raised.value)


@pytest.mark.parametrize(("text", "ddl"), [
    ("amount * quantity", "DECIMAL(38,2)"),  # a BIGINT is DECIMAL(20,0) beside a decimal
    ("amount + 0.005", "DECIMAL(20,3)"),
    ("quantity * 2 - 1", "BIGINT"),
    ("amount / quantity", "DOUBLE"),
    ("ratio + amount", "DOUBLE"),
    ("ROUND(amount, 1)", "DECIMAL(18,1)"),
    ("FLOOR(amount)", "DECIMAL(17,0)"),
    ("CEIL(ratio)", "BIGINT"),
    ("COALESCE(quantity, amount)", "DECIMAL(22,2)"),
    ("CASE WHEN paid THEN 'card' END", "STRING"),
    ("DATE_TRUNC('hour', occurred_at)", "TIMESTAMP"),
    ("quantity BETWEEN 1 AND 3 OR currency IS NULL", "BOOLEAN"),
])
def test_an_expression_has_sparks_result_type(text: str, ddl: str) -> None:
    assert typed(text, TYPES).type.ddl == ddl


def test_an_expression_knows_the_columns_it_reads() -> None:
    expression = typed("CASE WHEN paid THEN amount * quantity ELSE 0 END", TYPES)
    assert expression.columns == {"paid", "amount", "quantity"}


def test_arithmetic_is_exact_in_decimal_and_a_zero_divisor_gives_null() -> None:
    table = rows(amount=[Decimal("19.99"), Decimal("0.10"), None],
                 quantity=[3, 0, 2])
    assert values("amount * quantity", table) == [Decimal("59.97"), Decimal("0.00"), None]
    assert values("amount / quantity", table) == [19.99 / 3, None, None]
    assert values("quantity - 5", table) == [-2, -5, -3]


def test_logic_is_three_valued() -> None:
    table = rows(paid=[True, False, None, None], quantity=[1, 1, 1, None])
    assert values("paid AND quantity = 1", table) == [True, False, None, None]
    assert values("paid OR quantity = 1", table) == [True, True, True, None]
    assert values("NOT paid", table) == [False, True, None, None]
    assert values("paid IS NULL", table) == [False, False, True, True]
    assert values("quantity IN (1, 2)", table) == [True, True, True, None]
    assert values("quantity NOT IN (2)", table) == [True, True, True, None]


def test_case_coalesce_and_between_pick_as_sql_does() -> None:
    table = rows(amount=[Decimal("5.00"), Decimal("20.00"), Decimal("250.00"), None])
    band = ("CASE WHEN amount < 20 THEN 'small' WHEN amount BETWEEN 20 AND 100 THEN 'medium' "
            "ELSE 'large' END")
    assert values(band, table) == ["small", "medium", "large", "large"]
    assert values("COALESCE(amount, 0)", table) == [Decimal("5.00"), Decimal("20.00"),
                                                    Decimal("250.00"), Decimal("0.00")]


def test_text_functions_count_characters_and_map_ascii_letters_only() -> None:
    table = rows(currency=["ÄRGER", "straße", "", None])
    assert values("LOWER(currency)", table) == ["Ärger", "straße", "", None]
    assert values("UPPER(currency)", table) == ["ÄRGER", "STRAßE", "", None]
    assert values("SUBSTRING(currency, 5)", table) == ["R", "ße", "", None]
    assert values("SUBSTRING(currency, 2, 3)", table) == ["RGE", "tra", "", None]


def test_rounding_is_half_away_from_zero_with_the_carry() -> None:
    table = rows(amount=[Decimal("2.50"), Decimal("-2.50"), Decimal("9.99"), Decimal("-0.01")])
    assert values("ROUND(amount, 0)", table) == [3, -3, 10, 0]
    assert values("ROUND(amount, 1)", table) == [Decimal("2.5"), Decimal("-2.5"),
                                                 Decimal("10.0"), Decimal("0.0")]
    assert values("FLOOR(amount)", table) == [2, -3, 9, -1]
    assert values("CEIL(amount)", table) == [3, -2, 10, 0]
    assert values("ABS(amount)", table)[1] == Decimal("2.50")


@pytest.mark.parametrize(("unit", "start"), [
    ("second", datetime(2026, 12, 3, 14, 37, 12, tzinfo=UTC)),
    ("hour", datetime(2026, 12, 3, 14, tzinfo=UTC)),
    ("week", datetime(2026, 11, 30, tzinfo=UTC)),  # the Monday before
    ("month", datetime(2026, 12, 1, tzinfo=UTC)),
    ("quarter", datetime(2026, 10, 1, tzinfo=UTC)),
    ("year", datetime(2026, 1, 1, tzinfo=UTC)),
])
def test_date_trunc_starts_the_period_in_utc(unit: str, start: datetime) -> None:
    table = rows(occurred_at=[MOMENT, None])
    assert values(f"DATE_TRUNC('{unit}', occurred_at)", table) == [start, None]
    assert values(f"occurred_at >= TIMESTAMP '{start.isoformat()}'", table) == [True, None]


def test_a_views_expressions_are_checked_against_the_contracts_with_the_views_name() -> None:
    view = load_views()["product_sales"]
    definition = view.model_dump(exclude_none=True) | {
        "name": "sales_check", "filter": "amount > 'ten'",
        "columns": {"band": "CASE WHEN amount < 20 THEN 'small' ELSE 'large' END",
                    "amount": "amount * 2", "discounted": "price * 0.9",
                    "share": "amount / SUM(amount)"},
    }
    definition["measures"][0]["filter"] = "band"
    definition["measures"][1]["filter"] = "RAND() < 0.1"
    with pytest.raises(ViewError) as raised:
        ViewDefinition.model_validate(definition).check_against(ContractRegistry())
    message = str(raised.value)
    assert message.startswith("view 'sales_check': ")
    assert "derived column 'amount' would hide the column of that name" in message
    assert "derived column 'discounted': 'price * 0.9': unknown column 'price'" in message
    assert """filter: "amount > 'ten'": no common type for DECIMAL(18,2), STRING""" in message
    assert "measure 'orders' filter: 'band' is STRING, not a condition" in message
    assert ("derived column 'share': 'amount / SUM(amount)': aggregate SUM(amount) inside an "
            "expression") in message
    assert "measure 'units' filter: 'RAND() < 0.1': RAND() is not deterministic" in message


def test_a_derived_column_is_a_dimension_and_a_measures_input() -> None:
    view = load_views()["product_sales"]
    definition = view.model_dump(exclude_none=True) | {
        "name": "sales_bands", "dimensions": ["currency", "band"],
        "columns": {"line_total": "amount * quantity",
                    "band": "CASE WHEN line_total < 20 THEN 'small' ELSE 'large' END"},
        "measures": [{"name": "revenue", "kind": "sum", "column": "line_total"}],
    }
    banded = ViewDefinition.model_validate(definition)
    banded.check_against(ContractRegistry())
    assert list(banded.expressions.columns) == ["line_total", "band"]
    assert banded.expressions.columns["band"].columns == {"line_total"}
    assert set(banded.event_columns) == {"occurred_at", "currency", "amount", "quantity"}
