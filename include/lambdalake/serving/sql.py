"""Read-only SQL over the merged views: the same snapshot the rows API serves, in DuckDB.

A statement is parsed with sqlglot and refused unless it is one query (``SELECT``, set
operations, ``WITH``) whose tables are view names or its own common table expressions: no
table functions (``read_csv``, ``range``, ``duckdb_settings()``), no catalogs, nothing that
writes or configures. What was checked is what runs: the parsed tree, printed again for
DuckDB. Each referenced view is the view's merged answer (``merged_rows``: every column
the rows API answers, ``source``, ``as_of``, ``complete`` and ``late_rows`` included) read
from its current snapshot, handed to DuckDB without a copy.

Each query runs on a connection of its own (about 10 ms to open) that reaches no file, no
network and no extension, whose configuration is locked, in UTC, on one thread, within
``serving.sql_memory_mb``; it is interrupted after ``serving.sql_timeout_seconds`` and its
answer cut after ``serving.sql_max_rows`` rows (``truncated``). At most
``serving.sql_concurrency`` queries run at once in a process; another waits up to the
timeout for its turn.

>>> answer = run_sql(store, views, "SELECT page, sum(views) FROM page_traffic GROUP BY page",
...                  settings.serving)  # doctest: +SKIP
>>> answer.rows[0]                                                 # doctest: +SKIP
{'page': '/a', 'sum(views)': 13}
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from lambdalake.serving.query import (
    QueryError,
    ViewQuery,
    describe,
    json_columns,
    merged_rows,
)
from lambdalake.serving.snapshot import SnapshotStore
from lambdalake.settings import ServingSettings
from lambdalake.views.definition import ViewDefinition


class SqlError(QueryError):
    """A statement the SQL surface refuses, or one DuckDB could not answer; says why."""


class SqlBusy(RuntimeError):
    """Every query slot stayed taken for the whole timeout."""


class NoRowsYet(RuntimeError):
    """A view the statement names has neither a batch nor a real-time table yet."""


@dataclass(frozen=True)
class SqlAnswer:
    """A statement's rows (JSON values), their columns and what they were read from."""

    columns: list[dict[str, str]]
    rows: list[dict[str, Any]]
    truncated: bool
    views: dict[str, dict[str, Any]]


QUERIES = (exp.Select, exp.Union, exp.Intersect, exp.Except)


def checked_statement(text: str, views: dict[str, ViewDefinition]) -> tuple[str, list[str]]:
    """The statement as DuckDB will run it and the views it reads, or ``SqlError``."""
    try:
        statements = [s for s in sqlglot.parse(text, read="duckdb") if s is not None]
    except (ParseError, TokenError) as error:
        raise SqlError(f"not SQL this surface reads: {_first_line(error)}") from None
    if len(statements) != 1:
        raise SqlError(f"one statement, please (found {len(statements)})")
    statement = statements[0]
    if not isinstance(statement, QUERIES):
        raise SqlError(f"only queries are answered (SELECT, WITH, UNION ...), not "
                       f"{statement.key.upper()}: the SQL surface is read-only")
    common = {cte.alias_or_name.lower() for cte in statement.find_all(exp.CTE)}
    named: list[str] = []
    for table in statement.find_all(exp.Table):
        if not isinstance(table.this, exp.Identifier):
            raise SqlError(f"table functions are not answered ({table.this.sql('duckdb')}): "
                           f"query the views ({', '.join(sorted(views))})")
        if table.args.get("db") or table.args.get("catalog"):
            raise SqlError(f"{table.sql('duckdb')} is not a view: query the views "
                           f"({', '.join(sorted(views))})")
        name = table.name.lower()
        if name in common:
            continue
        if name not in views:
            raise SqlError(f"no view {table.name!r} (views: {', '.join(sorted(views))})")
        if name not in named:
            named.append(name)
    return statement.sql(dialect="duckdb"), named


def _first_line(error: Exception) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


class SqlRunner:
    """Answers statements over a store's snapshots within ``settings``' limits."""

    def __init__(self, store: SnapshotStore, views: dict[str, ViewDefinition],
                 settings: ServingSettings) -> None:
        self.store = store
        self.views = views
        self.settings = settings
        self._slots = threading.BoundedSemaphore(settings.sql_concurrency)

    def answer(self, text: str, max_rows: int | None = None) -> SqlAnswer:
        """``text``'s answer, at most ``max_rows`` (default and cap: ``sql_max_rows``)."""
        if max_rows is not None and max_rows < 1:
            raise SqlError(f"max_rows must be 1 or more, not {max_rows}")
        statement, named = checked_statement(text, self.views)
        limit = min(max_rows or self.settings.sql_max_rows, self.settings.sql_max_rows)
        snapshots = {name: self.store.get(name) for name in named}
        tables = {}
        for name, snapshot in snapshots.items():
            rows = merged_rows(snapshot, ViewQuery(
                self.views[name], serve_incomplete=self.settings.serves_incomplete))
            if rows is None:
                raise NoRowsYet(f"view {name!r} has no rows yet (no batch slice published, "
                                "no real-time write)")
            tables[name] = rows
        if not self._slots.acquire(timeout=self.settings.sql_timeout_seconds):
            raise SqlBusy(f"{self.settings.sql_concurrency} SQL queries kept running for "
                          f"{self.settings.sql_timeout_seconds:g} s: try again")
        try:
            columns, page, truncated = self._run(statement, tables, limit)
        finally:
            self._slots.release()
        return SqlAnswer(columns, json_rows(page), truncated,
                         {name: describe(snapshot) for name, snapshot in snapshots.items()})

    def _run(self, statement: str, tables: dict[str, pa.Table], limit: int
             ) -> tuple[list[dict[str, str]], pa.Table, bool]:
        connection = sandbox(self.settings.sql_memory_mb)
        interrupt = threading.Timer(self.settings.sql_timeout_seconds, connection.interrupt)
        try:
            for name, rows in tables.items():
                connection.register(name, rows)
            interrupt.start()
            relation = connection.sql(statement)
            columns = [{"name": name, "type": str(kind)}
                       for name, kind in zip(relation.columns, relation.types, strict=True)]
            repeated = sorted({c["name"] for c in columns
                               if [d["name"] for d in columns].count(c["name"]) > 1})
            if repeated:
                raise SqlError(f"columns named twice: {', '.join(repeated)} (alias them)")
            batches, held = [], 0
            reader = relation.to_arrow_reader(min(limit + 1, 2048))
            for batch in reader:
                batches.append(batch)
                held += batch.num_rows
                if held > limit:
                    break
            page = pa.Table.from_batches(batches, reader.schema)
            return columns, page.slice(0, limit), held > limit
        except (duckdb.Error, OSError) as error:  # read through Arrow, DuckDB's error is one
            raise self._refusal(error) from None
        finally:
            interrupt.cancel()
            connection.close()


    def _refusal(self, error: Exception) -> SqlError:
        """What to tell the client about ``error``, raised by DuckDB or by the Arrow reader
        that streams its answer (which carries DuckDB's message in an ``OSError``)."""
        message = _first_line(error)
        if isinstance(error, duckdb.InterruptException) or message.startswith("INTERRUPT"):
            return SqlError(f"the query ran longer than {self.settings.sql_timeout_seconds:g} "
                            "s (serving.sql_timeout_seconds): narrow it")
        if isinstance(error, duckdb.OutOfMemoryException) or message.startswith("Out of Memory"):
            return SqlError(f"the query needs more than {self.settings.sql_memory_mb} MiB "
                            "(serving.sql_memory_mb): narrow it")
        return SqlError(message)


def sandbox(memory_mb: int) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB that reaches no file, network or extension, answers instants in
    UTC, uses one thread and ``memory_mb``, and whose configuration nothing can change."""
    connection = duckdb.connect(config={
        "enable_external_access": False, "autoinstall_known_extensions": False,
        "autoload_known_extensions": False, "threads": 1, "memory_limit": f"{memory_mb}MB"})
    connection.execute("SET TimeZone = 'UTC'")
    connection.execute("SET lock_configuration = true")
    return connection


def json_rows(page: pa.Table) -> list[dict[str, Any]]:
    """The rows with JSON's values: what the rows API answers for its types (instants as
    ISO-8601 UTC, decimals as exact text: ``json_columns``), integers of any width (DuckDB
    sums to 128 bits) as numbers, NaN and infinities as null (JSON has none), and dates,
    times, intervals and UUIDs as DuckDB writes them."""
    ready = pa.table({name: _json_ready(name, column)
                      for name, column in zip(page.column_names, page.columns, strict=True)})
    rows: list[dict[str, Any]] = json_columns(ready).to_pylist()
    if not any(_integer_decimals(field.type) for field in page.schema):
        return rows
    return [_as_numbers(row) for row in rows]


_WIDE = "\x00wide:"
"""Marks an integer beyond 64 bits, carried as text until it becomes a Python int."""


def _json_ready(name: str, column: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """``column`` in types ``json_columns`` answers, its lists' and structs' values too."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    kind = column.type
    if _integer_decimals(kind) and pa.types.is_decimal(kind):
        try:
            return column.cast(pa.int64())
        except pa.ArrowInvalid:  # beyond 64 bits: exact text, made a number per row
            return pc.binary_join_element_wise(_WIDE, column.cast(pa.string()), "")
    if pa.types.is_floating(kind):
        return pc.if_else(pc.is_finite(column), column, pa.scalar(None, kind))
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return type(column).from_arrays(column.offsets, _json_ready(name, column.values),
                                        mask=column.is_null())
    if pa.types.is_struct(kind):
        names = [kind.field(i).name for i in range(kind.num_fields)]
        return pa.StructArray.from_arrays(
            [_json_ready(f"{name}.{field}", values)
             for field, values in zip(names, column.flatten(), strict=True)],
            names=names, mask=column.is_null())
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind) or pa.types.is_nested(kind):
        raise _not_json(name, kind)
    if pa.types.is_temporal(kind) and not pa.types.is_timestamp(kind) or \
            pa.types.is_interval(kind) or pa.types.is_dictionary(kind):
        try:
            return column.cast(pa.string())
        except pa.ArrowNotImplementedError:  # intervals
            raise _not_json(name, kind) from None
    return column


def _not_json(name: str, kind: pa.DataType) -> SqlError:
    return SqlError(f"column {name!r} is {kind}, which JSON cannot hold as it is: "
                    "cast it to VARCHAR")


def _integer_decimals(kind: pa.DataType) -> bool:
    """Whether ``kind`` is, or holds, a decimal of scale 0 (which may become ``_WIDE``)."""
    if pa.types.is_decimal(kind):
        return bool(kind.scale == 0)
    return any(_integer_decimals(kind.field(i).type) for i in range(kind.num_fields))


def _as_numbers(value: Any) -> Any:
    """``value`` with every wide integer (``_WIDE`` text) made a Python int."""
    if isinstance(value, str) and value.startswith(_WIDE):
        return int(value[len(_WIDE):])
    if isinstance(value, dict):
        return {key: _as_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_as_numbers(item) for item in value]
    return value
