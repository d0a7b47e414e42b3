"""The view language's expressions: a view's ``filter``, a measure's ``filter`` and derived
``columns``, written in a small subset of SQL.

An expression is parsed once by sqlglot (a maintained SQL parser, Spark's dialect), typed
against the columns the view can read (``typed``), and compiled from that one typed tree
for both layers: a Spark column for the batch layer (``to_spark``) and an evaluation on
Arrow for the speed layer (``evaluate_arrow``). Each construct is defined so that both
give the same value for every row, NULLs included, and a property test holds them to it:

* arithmetic ``+ - *`` on BIGINT, DECIMAL (exact, with Spark's result precision and scale;
  refused where that would round) and DOUBLE; ``/`` is always DOUBLE, and NULL for a zero
  divisor (like Druid's and SQL's ``try_divide``); unary ``-``;
* comparisons, ``AND``/``OR``/``NOT`` (three-valued), ``IN`` a list of literals,
  ``BETWEEN``, ``IS [NOT] NULL``, ``CASE WHEN``, ``COALESCE``;
* ``LOWER``/``UPPER`` of ASCII letters (the JVM and Arrow map other letters differently),
  ``SUBSTRING(s, start[, length])`` with literal bounds, counted in characters;
* ``ROUND(x, digits)`` of BIGINT and DECIMAL (half away from zero; a DOUBLE is refused: the
  layers round binary fractions differently), ``ABS``, ``FLOOR``, ``CEIL``;
* ``DATE_TRUNC('hour', occurred_at)`` and the other units from second to year, in UTC;
  ``TIMESTAMP '2026-12-01 00:00:00'`` literals (UTC).

Anything else (aggregates, window functions, non-deterministic functions such as
``RAND()`` or ``NOW()``, subqueries, unknown columns, type errors) raises
``ExpressionError`` naming the expression and the problem.

>>> expression = typed("amount * quantity", {"amount": SqlType.of("DECIMAL(18,2)"),
...                                         "quantity": SqlType.of("BIGINT")})
>>> expression.type.ddl
'DECIMAL(38,2)'
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column

MAX_PRECISION = 38
_DECIMAL = re.compile(r"^DECIMAL\((\d+),\s*(\d+)\)$")
_NUMERIC = ("BIGINT", "DECIMAL", "DOUBLE")


class ExpressionError(ValueError):
    """An expression is outside the language or does not type; the message says why."""


@dataclass(frozen=True)
class SqlType:
    """A column's or an expression's type: STRING, BIGINT, DECIMAL(p,s), DOUBLE, BOOLEAN,
    TIMESTAMP, or NULL (an untyped ``NULL`` literal, until its context types it)."""

    name: str
    precision: int = 0
    scale: int = 0

    @classmethod
    def of(cls, ddl: str) -> SqlType:
        """The type of a contract's Spark DDL type (``DECIMAL(18,2)``, ``BIGINT``, ...)."""
        decimal = _DECIMAL.match(ddl.upper())
        if decimal:
            return cls("DECIMAL", int(decimal[1]), int(decimal[2]))
        if ddl.upper() not in ("STRING", "BIGINT", "DOUBLE", "BOOLEAN", "TIMESTAMP"):
            raise ExpressionError(f"unsupported column type {ddl}")
        return cls(ddl.upper())

    @property
    def ddl(self) -> str:
        return f"DECIMAL({self.precision},{self.scale})" if self.name == "DECIMAL" else self.name

    @property
    def numeric(self) -> bool:
        return self.name in _NUMERIC

    def arrow(self) -> pa.DataType:
        import pyarrow as pa

        if self.name == "DECIMAL":
            return pa.decimal128(self.precision, self.scale)
        return {"STRING": pa.string(), "BIGINT": pa.int64(), "DOUBLE": pa.float64(),
                "BOOLEAN": pa.bool_(), "TIMESTAMP": pa.timestamp("us", tz="UTC"),
                "NULL": pa.null()}[self.name]


STRING, BIGINT, DOUBLE, BOOLEAN, TIMESTAMP, NULL = (
    SqlType(name) for name in ("STRING", "BIGINT", "DOUBLE", "BOOLEAN", "TIMESTAMP", "NULL"))
BIGINT_AS_DECIMAL = SqlType("DECIMAL", 20, 0)  # Spark's view of a BIGINT in decimal arithmetic


@dataclass(frozen=True)
class Node:
    """One operation of a typed expression: ``op`` on ``args``, giving ``type``; ``value``
    holds an operation's literal parameters (a column's name, a literal, a unit)."""

    op: str
    type: SqlType
    args: tuple[Node, ...] = ()
    value: Any = None


@dataclass(frozen=True)
class Expression:
    """A parsed, typed expression: its text, its tree and the columns it reads."""

    text: str
    tree: Node
    columns: frozenset[str] = field(default_factory=frozenset)

    @property
    def type(self) -> SqlType:
        return self.tree.type


def typed(text: str, columns: dict[str, SqlType]) -> Expression:
    """``text`` parsed and typed against ``columns`` (name → type); raises
    ``ExpressionError`` for anything outside the language."""
    from lambdalake.views.expression_parser import parse_and_type

    tree, read = parse_and_type(text, columns)
    if tree.type == NULL:
        raise ExpressionError(f"{text!r}: an expression needs a type, not only NULL")
    return Expression(text, tree, frozenset(read))


def decimal_result(op: str, left: SqlType, right: SqlType) -> SqlType:
    """Spark's result type of decimal ``left op right`` (``+``, ``-``, ``*``), its
    precision capped at 38 digits; refused where Spark would then round to fewer
    decimal places (Arrow would not)."""
    if op == "mul":
        precision, scale = left.precision + right.precision + 1, left.scale + right.scale
    else:
        scale = max(left.scale, right.scale)
        precision = max(left.precision - left.scale, right.precision - right.scale) + scale + 1
    if precision > MAX_PRECISION:  # Spark keeps the whole digits, and some scale
        adjusted = max(MAX_PRECISION - (precision - scale), min(scale, 6))
        if adjusted < scale:
            raise ExpressionError(f"{left.ddl} {op} {right.ddl} would be rounded to fit "
                                  f"{MAX_PRECISION} digits")
        precision = MAX_PRECISION
    return SqlType("DECIMAL", precision, scale)


def common_type(types: list[SqlType]) -> SqlType:
    """The type values of ``types`` meet in (comparisons, CASE, COALESCE, IN)."""
    known = [t for t in types if t != NULL]
    if not known:
        return NULL
    if all(t == known[0] for t in known):
        return known[0]
    if not all(t.numeric for t in known):
        raise ExpressionError(f"no common type for {', '.join(t.ddl for t in known)}")
    if DOUBLE in known:
        return DOUBLE
    decimals = [BIGINT_AS_DECIMAL if t == BIGINT else t for t in known]
    scale = max(t.scale for t in decimals)
    precision = max(t.precision - t.scale for t in decimals) + scale
    if precision > MAX_PRECISION:
        raise ExpressionError(f"no common type for {', '.join(t.ddl for t in known)} "
                              f"within {MAX_PRECISION} digits")
    return SqlType("DECIMAL", precision, scale)


def cast(node: Node, to: SqlType) -> Node:
    """``node`` as ``to`` (a widening: exact, or to DOUBLE); a NULL literal takes the type."""
    if node.type == to:
        return node
    if node.op == "literal" and node.value is None:
        return Node("literal", to)
    return Node("cast", to, (node,))


_ASCII_UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def to_spark(expression: Expression | Node, resolve: Any = None) -> Column:
    """The expression as a Spark column over the view's events (``resolve``: a column's
    Spark column by name, for derived columns; default ``F.col``)."""
    from pyspark.sql import functions as F

    node = expression.tree if isinstance(expression, Expression) else expression
    column_of = resolve or F.col

    def spark(n: Node) -> Column:
        args = [spark(a) for a in n.args]
        if n.op == "column":
            return column_of(n.value)
        if n.op == "literal":
            return F.lit(n.value).cast(n.type.ddl) if n.type != NULL else F.lit(None)
        if n.op == "cast":
            return args[0].cast(n.type.ddl)
        if n.op in ("add", "sub", "mul"):
            left, right = args
            value = left + right if n.op == "add" else left - right if n.op == "sub" \
                else left * right
            return value.cast(n.type.ddl)
        if n.op == "div":
            return F.when(args[1] != F.lit(0.0), args[0] / args[1])
        if n.op == "neg":
            return -args[0]
        if n.op in _COMPARISONS:
            left, right = args
            return {"eq": left == right, "ne": left != right, "lt": left < right,
                    "le": left <= right, "gt": left > right, "ge": left >= right}[n.op]
        if n.op == "and":
            return args[0] & args[1]
        if n.op == "or":
            return args[0] | args[1]
        if n.op == "not":
            return ~args[0]
        if n.op == "is_null":
            return args[0].isNull()
        if n.op == "in":
            return args[0].isin(list(n.value))
        if n.op == "case":
            *pairs, otherwise = args
            value = F.when(pairs[0], pairs[1])
            for condition, result in zip(pairs[2::2], pairs[3::2], strict=True):
                value = value.when(condition, result)
            return value.otherwise(otherwise)
        if n.op == "coalesce":
            return F.coalesce(*args)
        if n.op == "lower":
            return F.translate(args[0], _ASCII_UPPER, _ASCII_UPPER.lower())
        if n.op == "upper":
            return F.translate(args[0], _ASCII_UPPER.lower(), _ASCII_UPPER)
        if n.op == "substring":
            start, size = n.value
            return args[0].substr(start, 2**31 - 1 if size is None else size)
        if n.op == "round":
            return F.round(args[0], n.value).cast(n.type.ddl)
        if n.op == "abs":
            return F.abs(args[0])
        if n.op in ("floor", "ceil"):
            rounded = F.floor(args[0]) if n.op == "floor" else F.ceil(args[0])
            return rounded.cast(n.type.ddl)
        if n.op == "trunc":
            return F.date_trunc(n.value, args[0])
        raise AssertionError(f"no Spark form for {n.op}")

    return spark(node)


_COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge")


def evaluate_arrow(expression: Expression | Node, table: pa.Table,
                   resolve: Any = None) -> pa.ChunkedArray:
    """The expression's value on every row of ``table`` (the speed layer's micro-batch);
    ``resolve``: a column's values by name, for derived columns (default: the table's)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    node = expression.tree if isinstance(expression, Expression) else expression
    rows = table.num_rows
    column_of = resolve or table.column

    def array(value: Any) -> Any:
        return pa.repeat(value, rows) if isinstance(value, pa.Scalar) else value

    def decimal256(value: Any, of: SqlType) -> Any:
        return pc.cast(value, pa.decimal256(of.precision, of.scale))

    def widened(value: Any, of: SqlType) -> Any:
        """A decimal with room for one more whole digit (rounding's carry)."""
        if of.name != "DECIMAL":
            return value
        return pc.cast(value, pa.decimal256(of.precision + 1, of.scale))

    def arrow(n: Node) -> Any:
        args = [arrow(a) for a in n.args]
        if n.op == "column":
            return pc.cast(column_of(n.value), n.type.arrow())
        if n.op == "literal":
            return pa.scalar(n.value, n.type.arrow())
        if n.op == "cast":
            if n.type == DOUBLE and n.args[0].type.name == "DECIMAL":
                # Arrow's decimal-to-double cast is not correctly rounded (0.4115 becomes
                # 0.41150000000000003); its parsing of the decimal's text is, as Spark's cast
                return pc.cast(pc.cast(args[0], pa.string()), pa.float64())
            return pc.cast(args[0], n.type.arrow())
        if n.op in ("add", "sub", "mul"):
            function = {"add": pc.add_checked, "sub": pc.subtract_checked,
                        "mul": pc.multiply_checked}[n.op]
            if n.type.name == "DECIMAL":  # exact in 76 digits, then checked into 38
                left, right = (decimal256(a, child.type) for a, child in zip(args, n.args,
                                                                               strict=True))
                return pc.cast(function(left, right), n.type.arrow())
            return function(*args)
        if n.op == "div":
            return pc.if_else(pc.not_equal(args[1], 0.0), pc.divide(args[0], args[1]),
                              pa.scalar(None, pa.float64()))
        if n.op == "neg":
            return pc.negate_checked(args[0])
        if n.op in _COMPARISONS:
            return getattr(pc, {"eq": "equal", "ne": "not_equal", "lt": "less",
                                "le": "less_equal", "gt": "greater",
                                "ge": "greater_equal"}[n.op])(*args)
        if n.op == "and":
            return pc.and_kleene(*args)
        if n.op == "or":
            return pc.or_kleene(*args)
        if n.op == "not":
            return pc.invert(args[0])
        if n.op == "is_null":
            return pc.is_null(args[0])
        if n.op == "in":
            value = array(args[0])
            found = pc.is_in(value, value_set=pa.array(list(n.value), n.args[0].type.arrow()))
            return pc.if_else(pc.is_valid(value), found, pa.scalar(None, pa.bool_()))
        if n.op == "case":
            *pairs, otherwise = (array(a) for a in args)
            conditions = pc.make_struct(*pairs[0::2],
                                        field_names=[str(i) for i in range(len(pairs) // 2)])
            return pc.case_when(conditions, *pairs[1::2], otherwise)
        if n.op == "coalesce":
            return pc.coalesce(*args)
        if n.op in ("lower", "upper"):
            return getattr(pc, f"ascii_{n.op}")(args[0])
        if n.op == "substring":
            start, size = n.value
            return pc.utf8_slice_codeunits(args[0], start - 1,
                                           None if size is None else start - 1 + size)
        if n.op == "round":  # a digit more first: 9.99 rounds to 10.0
            return pc.cast(pc.round(widened(args[0], n.args[0].type), n.value,
                                    round_mode="half_towards_infinity"), n.type.arrow())
        if n.op == "abs":
            return pc.abs_checked(args[0])
        if n.op in ("floor", "ceil"):
            return pc.cast(getattr(pc, n.op)(widened(args[0], n.args[0].type)),
                           n.type.arrow())
        if n.op == "trunc":
            return pc.floor_temporal(args[0], unit=n.value.lower(), week_starts_monday=True)
        raise AssertionError(f"no Arrow form for {n.op}")

    result = array(arrow(node))
    return result if isinstance(result, pa.ChunkedArray) else pa.chunked_array([result])
