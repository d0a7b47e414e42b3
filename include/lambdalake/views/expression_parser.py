"""Parsing and typing of the view language's expressions (``lambdalake.views.expressions``):
sqlglot's tree, read in Spark's dialect, becomes a typed ``Node`` tree, or an
``ExpressionError`` says which part is outside the language or does not type. Imported only
when a definition is checked (DAG files that list views do not pay for sqlglot)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import sqlglot
from sqlglot import exp

from lambdalake.views.expressions import (
    BIGINT,
    BIGINT_AS_DECIMAL,
    BOOLEAN,
    DOUBLE,
    MAX_PRECISION,
    NULL,
    STRING,
    TIMESTAMP,
    ExpressionError,
    Node,
    SqlType,
    cast,
    common_type,
    decimal_result,
)

_TRUNC_UNITS = ("SECOND", "MINUTE", "HOUR", "DAY", "WEEK", "MONTH", "QUARTER", "YEAR")
_NON_DETERMINISTIC = (exp.Rand, exp.CurrentTimestamp, exp.CurrentDate, exp.CurrentTime,
                      exp.Uuid)


def parse_and_type(text: str, columns: dict[str, SqlType]) -> tuple[Node, set[str]]:
    """The typed tree of ``text`` and the columns it reads."""
    try:
        parsed = sqlglot.parse_one(text, read="spark")
    except sqlglot.errors.ParseError as error:
        raise ExpressionError(f"{text!r} does not parse: {error}") from error
    try:
        tree = _Typer(columns).node(parsed)
    except ExpressionError as error:
        raise ExpressionError(f"{text!r}: {error}") from error
    return tree, {column.name for column in parsed.find_all(exp.Column)}


class _Typer:
    """sqlglot's tree → a typed ``Node`` tree, refusing what the language does not have."""

    def __init__(self, columns: dict[str, SqlType]) -> None:
        self.columns = columns

    def node(self, tree: exp.Expr) -> Node:
        if isinstance(tree, exp.Paren):
            return self.node(tree.this)
        if isinstance(tree, exp.AggFunc):
            raise ExpressionError(f"aggregate {tree.sql(dialect='spark')} inside an "
                                  "expression: aggregates are measures")
        if isinstance(tree, _NON_DETERMINISTIC):
            raise ExpressionError(f"{tree.sql(dialect='spark')} is not deterministic: both "
                                  "layers must compute the same value")
        handler = _HANDLERS.get(type(tree))
        if handler is None:
            raise ExpressionError(f"{tree.sql(dialect='spark')!r} is not in the view language")
        typed_node: Node = handler(self, tree)
        return typed_node

    def of_type(self, tree: exp.Expression, wanted: SqlType) -> Node:
        """The node of ``tree`` as ``wanted``; a bare NULL is one of any type."""
        node = self.node(tree)
        if node.type not in (wanted, NULL):
            raise ExpressionError(
                f"{tree.sql(dialect='spark')} is {node.type.ddl}, not {wanted.ddl}")
        return cast(node, wanted)

    def boolean(self, tree: exp.Expression) -> Node:
        return self.of_type(tree, BOOLEAN)

    def numeric(self, tree: exp.Expression) -> Node:
        node = self.node(tree)
        if node.type == NULL:  # NULL + 1: a number that is not there
            return cast(node, BIGINT)
        if not node.type.numeric:
            raise ExpressionError(f"{tree.sql(dialect='spark')} is {node.type.ddl}, "
                                  "not a number")
        return node

    def column(self, tree: exp.Column) -> Node:
        if tree.table:
            raise ExpressionError(f"{tree.sql()}: columns are not qualified")
        name = tree.name
        if name not in self.columns:
            raise ExpressionError(f"unknown column {name!r} (known: "
                                  f"{', '.join(sorted(self.columns))})")
        return Node("column", self.columns[name], value=name)

    def literal(self, tree: exp.Literal) -> Node:
        if tree.is_string:
            return Node("literal", STRING, value=tree.this)
        text = tree.this
        if re.fullmatch(r"\d+", text):
            value = int(text)
            if value >= 2**63:
                raise ExpressionError(f"{text} is beyond BIGINT")
            return Node("literal", BIGINT, value=value)
        if re.fullmatch(r"\d*\.\d+|\d+\.\d*", text):
            number = Decimal(text)
            digits, exponent = number.as_tuple().digits, int(number.as_tuple().exponent)
            scale = -exponent
            return Node("literal", SqlType("DECIMAL", max(len(digits), scale, 1), scale),
                        value=number)
        return Node("literal", DOUBLE, value=float(text))

    def null(self, tree: exp.Null) -> Node:
        return Node("literal", NULL)

    def boolean_literal(self, tree: exp.Boolean) -> Node:
        return Node("literal", BOOLEAN, value=bool(tree.this))

    def timestamp_literal(self, tree: exp.Cast) -> Node:
        if not (isinstance(tree.this, exp.Literal) and tree.this.is_string
                and tree.to.is_type("timestamp", "timestampltz", "timestamptz")):
            raise ExpressionError(f"{tree.sql(dialect='spark')}: the only CAST is a "
                                  "TIMESTAMP '...' literal")
        try:
            moment = datetime.fromisoformat(tree.this.this.replace("Z", "+00:00"))
        except ValueError as error:
            raise ExpressionError(f"{tree.this.this!r} is not a timestamp") from error
        moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
        return Node("literal", TIMESTAMP, value=moment)

    def arithmetic(self, tree: exp.Binary) -> Node:
        op = {exp.Add: "add", exp.Sub: "sub", exp.Mul: "mul", exp.Div: "div"}[type(tree)]
        left, right = self.numeric(tree.this), self.numeric(tree.expression)
        if op == "div" or DOUBLE in (left.type, right.type):
            return Node(op, DOUBLE, (cast(left, DOUBLE), cast(right, DOUBLE)))
        if left.type == right.type == BIGINT:
            return Node(op, BIGINT, (left, right))
        left = cast(left, BIGINT_AS_DECIMAL) if left.type == BIGINT else left
        right = cast(right, BIGINT_AS_DECIMAL) if right.type == BIGINT else right
        return Node(op, decimal_result(op, left.type, right.type), (left, right))

    def negation(self, tree: exp.Neg) -> Node:
        value = self.numeric(tree.this)
        if value.op == "literal" and value.value is not None:  # -250: a literal
            return Node("literal", value.type, value=-value.value)
        return Node("neg", value.type, (value,))

    def compared(self, trees: list[exp.Expression]) -> list[Node]:
        nodes = [self.node(tree) for tree in trees]
        common = _met([n.type for n in nodes])
        return [cast(n, common) for n in nodes]

    def comparison(self, tree: exp.Binary) -> Node:
        op = {exp.EQ: "eq", exp.NEQ: "ne", exp.LT: "lt", exp.LTE: "le", exp.GT: "gt",
              exp.GTE: "ge"}[type(tree)]
        return Node(op, BOOLEAN, tuple(self.compared([tree.this, tree.expression])))

    def between(self, tree: exp.Between) -> Node:
        value, low, high = self.compared([tree.this, tree.args["low"], tree.args["high"]])
        return Node("and", BOOLEAN, (Node("ge", BOOLEAN, (value, low)),
                                     Node("le", BOOLEAN, (value, high))))

    def logical(self, tree: exp.Binary) -> Node:
        op = "and" if isinstance(tree, exp.And) else "or"
        return Node(op, BOOLEAN, (self.boolean(tree.this), self.boolean(tree.expression)))

    def negated(self, tree: exp.Not) -> Node:
        return Node("not", BOOLEAN, (self.boolean(tree.this),))

    def is_null(self, tree: exp.Is) -> Node:
        if not isinstance(tree.expression, exp.Null):
            raise ExpressionError(f"{tree.sql(dialect='spark')}: only IS [NOT] NULL")
        return Node("is_null", BOOLEAN, (self.node(tree.this),))

    def is_in(self, tree: exp.In) -> Node:
        listed = tree.expressions
        if not listed or tree.args.get("query") is not None:
            raise ExpressionError(f"{tree.sql(dialect='spark')}: IN takes a list of literals")
        literals = [self.node(item) for item in listed]
        if any(n.op != "literal" or n.value is None for n in literals):
            raise ExpressionError(f"{tree.sql(dialect='spark')}: IN takes non-NULL literals")
        value, *_ = nodes = self.compared([tree.this, *listed])
        return Node("in", BOOLEAN, (value,), tuple(_literal_value(n) for n in nodes[1:]))

    def case(self, tree: exp.Case) -> Node:
        if tree.this is not None:
            raise ExpressionError("CASE x WHEN ...: write CASE WHEN x = ... THEN")
        conditions = [self.boolean(branch.this) for branch in tree.args["ifs"]]
        values = [self.node(branch.args["true"]) for branch in tree.args["ifs"]]
        otherwise = tree.args.get("default")
        values.append(self.node(otherwise) if otherwise is not None else Node("literal", NULL))
        common = _met([v.type for v in values])
        values = [cast(v, common) for v in values]
        args = [part for pair in zip(conditions, values, strict=False) for part in pair]
        return Node("case", common, (*args, values[-1]))

    def coalesce(self, tree: exp.Coalesce) -> Node:
        nodes = self.compared([tree.this, *tree.expressions])
        return Node("coalesce", nodes[0].type, tuple(nodes))

    def case_mapping(self, tree: exp.Lower | exp.Upper) -> Node:
        value = self.string(tree.this)
        return Node("lower" if isinstance(tree, exp.Lower) else "upper", STRING, (value,))

    def string(self, tree: exp.Expression) -> Node:
        return self.of_type(tree, STRING)

    def substring(self, tree: exp.Substring) -> Node:
        value = self.string(tree.this)
        start = _whole_literal(tree.args.get("start"), "SUBSTRING's start", minimum=1)
        length = tree.args.get("length")
        size = None if length is None else _whole_literal(length, "SUBSTRING's length", 0)
        return Node("substring", STRING, (value,), (start, size))

    def rounded(self, tree: exp.Round) -> Node:
        value = self.numeric(tree.this)
        digits = (0 if tree.args.get("decimals") is None
                  else _whole_literal(tree.args["decimals"], "ROUND's digits", 0))
        if value.type == DOUBLE:
            raise ExpressionError("ROUND of a DOUBLE: the JVM and Arrow round binary "
                                  "fractions differently; round a DECIMAL")
        if value.type == BIGINT:
            return value
        scale = min(digits, value.type.scale)
        result = SqlType("DECIMAL", min(MAX_PRECISION, value.type.precision
                                        - value.type.scale + 1 + scale), scale)
        return Node("round", result, (value,), scale)

    def absolute(self, tree: exp.Abs) -> Node:
        value = self.numeric(tree.this)
        return Node("abs", value.type, (value,))

    def floor_or_ceil(self, tree: exp.Floor | exp.Ceil) -> Node:
        if tree.args.get("decimals") is not None:
            raise ExpressionError(f"{tree.sql(dialect='spark')}: FLOOR and CEIL take no "
                                  "digits; use ROUND")
        value = self.numeric(tree.this)
        op = "floor" if isinstance(tree, exp.Floor) else "ceil"
        if value.type == BIGINT:
            return value
        result = (BIGINT if value.type == DOUBLE else
                  SqlType("DECIMAL", min(MAX_PRECISION,
                                         value.type.precision - value.type.scale + 1), 0))
        return Node(op, result, (value,))

    def truncated(self, tree: exp.TimestampTrunc | exp.DateTrunc) -> Node:
        unit = str(tree.args["unit"].name).upper()
        if unit not in _TRUNC_UNITS:
            raise ExpressionError(f"DATE_TRUNC to {unit!r}: the units are "
                                  f"{', '.join(_TRUNC_UNITS)}")
        value = self.node(tree.this)
        if value.type != TIMESTAMP:
            raise ExpressionError(f"DATE_TRUNC of {value.type.ddl}: only of a TIMESTAMP")
        return Node("trunc", TIMESTAMP, (value,), unit)


_HANDLERS: dict[type, Any] = {
    exp.Column: _Typer.column, exp.Literal: _Typer.literal, exp.Null: _Typer.null,
    exp.Boolean: _Typer.boolean_literal,
    **dict.fromkeys((exp.Cast, exp.TryCast), _Typer.timestamp_literal),
    **dict.fromkeys((exp.Add, exp.Sub, exp.Mul, exp.Div), _Typer.arithmetic),
    exp.Neg: _Typer.negation,
    **dict.fromkeys((exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE), _Typer.comparison),
    exp.Between: _Typer.between, **dict.fromkeys((exp.And, exp.Or), _Typer.logical),
    exp.Not: _Typer.negated, exp.Is: _Typer.is_null, exp.In: _Typer.is_in,
    exp.Case: _Typer.case, exp.Coalesce: _Typer.coalesce,
    **dict.fromkeys((exp.Lower, exp.Upper), _Typer.case_mapping),
    exp.Substring: _Typer.substring, exp.Round: _Typer.rounded, exp.Abs: _Typer.absolute,
    **dict.fromkeys((exp.Floor, exp.Ceil), _Typer.floor_or_ceil),
    **dict.fromkeys((exp.TimestampTrunc, exp.DateTrunc), _Typer.truncated),
}


def _met(types: list[SqlType]) -> SqlType:
    """The common type of ``types``; BIGINT where all are NULL (``NULL = NULL``)."""
    common = common_type(types)
    return BIGINT if common == NULL else common


def _whole_literal(tree: exp.Expression | None, what: str, minimum: int) -> int:
    value = tree.this if isinstance(tree, exp.Literal) and not tree.is_string else None
    if value is None or not re.fullmatch(r"\d+", str(value)) or int(value) < minimum:
        raise ExpressionError(f"{what} must be a whole number literal >= {minimum}")
    return int(value)


def _literal_value(node: Node) -> Any:
    """A literal ``node``'s value, cast to ``node.type`` (for IN lists)."""
    if node.op == "literal":
        return node.value
    inner = _literal_value(node.args[0])
    if node.type == DOUBLE:
        return float(inner)
    if node.type.name == "DECIMAL":
        return Decimal(inner)
    return inner
