"""Random expressions of the view language and random rows to evaluate them on: the cases
of the property test that holds the batch layer's Spark form and the speed layer's Arrow
form of one typed tree to the same value, row for row (``tests/integration/views``).

Each generated expression is well typed by construction of its text, not by the code under
test: ``numeric``, ``condition``, ``text`` and ``moment`` each write an expression of that
kind of type, so the typer's refusals (a decimal that would round) are the only ones."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pyarrow as pa

COLUMNS = {"n": "BIGINT", "m": "BIGINT", "price": "DECIMAL(18,2)", "rate": "DECIMAL(10,4)",
           "x": "DOUBLE", "s": "STRING", "flag": "BOOLEAN", "t": "TIMESTAMP"}
"""The columns of the rows, with every type a contract field can have."""

_MOMENTS = [datetime(1970, 1, 1, tzinfo=UTC),  # fixed date: edge instants, no producing
            datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),  # fixed date: edge
            datetime(2024, 2, 29, 23, 59, 59, tzinfo=UTC),  # fixed date: a leap day
            datetime(2026, 12, 31, 23, 30, tzinfo=UTC),  # fixed date: a year's last hour
            datetime(2027, 1, 4, 0, 0, tzinfo=UTC)]  # fixed date: a Monday
_TEXTS = ["", "a", "Card", "CASH", "pay-pal", "Ärger", "straße", "ÿ", "zone 12", "  x "]


def random_rows(generator: random.Random, count: int) -> pa.Table:
    """``count`` rows with NULLs in every column, zeros, negatives, exact decimals at their
    scale, empty and non-ASCII strings and edge instants."""

    def maybe(value: Any) -> Any:
        return None if generator.random() < 0.15 else value

    def whole() -> int:
        return generator.choice([0, 1, -1, 7, 100, -250, generator.randint(-10**6, 10**6)])

    def cents() -> Decimal:
        return Decimal(generator.choice([0, 1, -1, 999, generator.randint(-10**8, 10**8)])) / 100

    def instant() -> datetime:
        if generator.random() < 0.4:
            return generator.choice(_MOMENTS)
        seconds = generator.randint(-2 * 10**9, 4 * 10**9)
        return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(  # fixed date: the epoch
            seconds=seconds, microseconds=generator.randint(0, 999_999))

    columns = {
        "id": pa.array(range(count), pa.int64()),
        "n": pa.array([maybe(whole()) for _ in range(count)], pa.int64()),
        "m": pa.array([maybe(whole()) for _ in range(count)], pa.int64()),
        "price": pa.array([maybe(cents()) for _ in range(count)], pa.decimal128(18, 2)),
        "rate": pa.array([maybe(Decimal(generator.randint(-99999, 99999)) / 10000)
                          for _ in range(count)], pa.decimal128(10, 4)),
        "x": pa.array([maybe(generator.choice([0.0, -0.0, 0.5, 1e-3, generator.uniform(-1e4, 1e4)]))
                       for _ in range(count)], pa.float64()),
        "s": pa.array([maybe(generator.choice(_TEXTS)) for _ in range(count)], pa.string()),
        "flag": pa.array([maybe(generator.random() < 0.5) for _ in range(count)], pa.bool_()),
        "t": pa.array([maybe(instant()) for _ in range(count)], pa.timestamp("us", tz="UTC")),
    }
    return pa.table(columns)


class ExpressionWriter:
    """Writes random expression texts, each of a known kind of type, up to a depth."""

    def __init__(self, generator: random.Random) -> None:
        self.random = generator

    def any(self, depth: int) -> str:
        return self.random.choice([self.numeric, self.numeric, self.condition, self.text,
                                   self.moment])(depth)

    def numeric(self, depth: int) -> str:
        leaves = ["n", "m", "price", "rate", "x", "n", "price", "x", "3", "-2", "0", "1.25",
                  "0.005", "NULL"]
        if depth <= 0 or self.random.random() < 0.25:
            return self.random.choice(leaves)
        inner = depth - 1
        choice = self.random.randrange(9)
        if choice == 0:
            operator = self.random.choice(["+", "-", "*", "/"])
            return f"({self.numeric(inner)} {operator} {self.numeric(inner)})"
        if choice == 1:
            return f"-({self.numeric(inner)})"
        if choice == 2:
            return f"CASE WHEN {self.condition(inner)} THEN {self.numeric(inner)} ELSE " \
                   f"{self.numeric(inner)} END"
        if choice == 3:
            return f"COALESCE({self.numeric(inner)}, {self.numeric(inner)})"
        if choice == 4:
            return f"ABS({self.numeric(inner)})"
        if choice == 5:
            return f"{self.random.choice(['FLOOR', 'CEIL'])}({self.numeric(inner)})"
        if choice == 6:
            exact = self.random.choice(["price", "rate", "n", "(price * 3)", "(rate + price)"])
            return f"ROUND({exact}, {self.random.randint(0, 4)})"
        if choice == 7:
            return f"CASE WHEN {self.condition(inner)} THEN {self.numeric(inner)} END"
        return self.random.choice(leaves)

    def condition(self, depth: int) -> str:
        if depth <= 0 or self.random.random() < 0.2:
            return self.random.choice(["flag", "flag", "TRUE", "FALSE", "n > m", "s = ''",
                                       "x > 0.5", "price >= rate"])
        inner = depth - 1
        choice = self.random.randrange(9)
        if choice == 0:
            operator = self.random.choice(["=", "<>", "<", "<=", ">", ">="])
            return f"{self.numeric(inner)} {operator} {self.numeric(inner)}"
        if choice == 1:
            return f"({self.condition(inner)} {self.random.choice(['AND', 'OR'])} " \
                   f"{self.condition(inner)})"
        if choice == 2:
            return f"NOT ({self.condition(inner)})"
        if choice == 3:
            listed = self.random.choice(["1, 7, -250", "0.5, 100", "1.25, 3, 999.99"])
            return f"{self.numeric(inner)} {self.random.choice(['IN', 'NOT IN'])} ({listed})"
        if choice == 4:
            return f"{self.text(inner)} IN ('Card', 'cash', '')"
        if choice == 5:
            return f"{self.numeric(inner)} BETWEEN {self.numeric(inner)} AND {self.numeric(inner)}"
        if choice == 6:
            return f"{self.any(inner)} IS {self.random.choice(['', 'NOT '])}NULL"
        if choice == 7:
            operator = self.random.choice(["=", "<", ">="])
            return f"{self.text(inner)} {operator} {self.text(inner)}"
        operator = self.random.choice(["=", "<", ">="])
        return f"{self.moment(inner)} {operator} {self.moment(inner)}"

    def text(self, depth: int) -> str:
        if depth <= 0 or self.random.random() < 0.3:
            return self.random.choice(["s", "s", "s", "'Card'", "''", "'Ärger'", "NULL"])
        inner = depth - 1
        choice = self.random.randrange(4)
        if choice == 0:
            return f"{self.random.choice(['LOWER', 'UPPER'])}({self.text(inner)})"
        if choice == 1:
            length = self.random.choice(["", ", 0", ", 2", ", 5"])
            return f"SUBSTRING({self.text(inner)}, {self.random.randint(1, 4)}{length})"
        if choice == 2:
            return f"CASE WHEN {self.condition(inner)} THEN {self.text(inner)} ELSE " \
                   f"{self.text(inner)} END"
        return f"COALESCE({self.text(inner)}, {self.text(inner)})"

    def moment(self, depth: int) -> str:
        if depth <= 0 or self.random.random() < 0.4:
            return self.random.choice(["t", "t", "t", "TIMESTAMP '2026-12-01 00:00:00'"])
        unit = self.random.choice(["second", "minute", "hour", "day", "week", "month",
                                   "quarter", "year"])
        return f"DATE_TRUNC('{unit}', {self.moment(depth - 1)})"
