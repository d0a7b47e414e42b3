"""Queries of the serving layer: validated, then answered from one snapshot of both layers.

A view's serving answer is its batch rows for windows wherever a published slice covers
them (before the batch high-water mark, and in intervals published beyond a gap after it)
and its real-time rows (each key's partial rows combined) for every other window, so no
window is counted by both layers or by neither. A query selects the windows that *start* in
``[start, end)``, optionally filtered on dimension values, ordered by window and
dimensions, one page at a time. Each row says which layer answered it (``source``) and as
of when (``as_of``: the batch computation or the real-time write).

A query is answered with Arrow compute on the snapshot's in-memory tables: each layer's
rows are kept sorted by window, so its side of the mark within the range is a zero-copy
slice; dimension filters are vectorised comparisons; the page is sorted and cut from what
is left. No SQL is involved, so no request value can become query text; names are checked
against the view definitions before they are used.

>>> query = parse_query(views, "page_traffic", start="2026-11-22T10:00Z",
...                     where=["page=/page/1"])  # doctest: +SKIP
>>> run_query(store.get("page_traffic"), query).rows[0]["source"]           # doctest: +SKIP
'batch'
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lambdalake.serving.snapshot import Completeness, ViewSnapshot, rows_between
from lambdalake.timeutil import epoch_microseconds, parse_utc
from lambdalake.views.definition import ViewDefinition


class QueryError(ValueError):
    """A request the serving layer refuses; the message says what to change."""


class UnknownView(QueryError):
    """No view has this name."""


@dataclass(frozen=True)
class ViewQuery:
    """A validated query of one view."""

    view: ViewDefinition
    start: datetime | None = None
    end: datetime | None = None
    filters: dict[str, str] = field(default_factory=dict)
    limit: int = 100
    offset: int = 0
    serve_incomplete: bool = True
    """Whether real-time rows that are not ``complete`` are answered (else left out)."""


@dataclass(frozen=True)
class QueryResult:
    """One page of a view's serving answer and what it was read from."""

    view: str
    rows: list[dict[str, Any]]
    next_offset: int | None
    snapshot: dict[str, Any]


def parse_time(text: str, name: str) -> datetime:
    """An ISO-8601 instant (a date means its midnight; no offset means UTC)."""
    try:
        return parse_utc(text, naive_is_utc=True)
    except ValueError as error:
        if "outside the years" in str(error):
            raise QueryError(f"{name}={text!r} lies outside the years 1 to 9999 in UTC") from None
        raise QueryError(f"{name}={text!r} is not an ISO-8601 time "
                         "(e.g. 2026-11-22T10:00:00Z)") from None


def parse_filters(expressions: list[str], view: ViewDefinition) -> dict[str, str]:
    """``["page=/cart"]`` -> ``{"page": "/cart"}``; only the view's dimensions may be named."""
    filters: dict[str, str] = {}
    for expression in expressions:
        name, equals, value = expression.partition("=")
        name = name.strip()
        if not equals or not name:
            raise QueryError(f"filter {expression!r} is not DIMENSION=VALUE")
        if name not in view.dimensions:
            raise QueryError(f"view {view.name!r} has no dimension {name!r} "
                             f"(dimensions: {', '.join(view.dimensions)})")
        if name in filters and filters[name] != value:
            raise QueryError(f"dimension {name!r} is filtered twice")
        filters[name] = value
    return filters


def parse_query(
    views: dict[str, ViewDefinition], view_name: str, *, start: str | None = None,
    end: str | None = None, where: list[str] | None = None, limit: int = 100, offset: int = 0,
    max_limit: int = 1000, serve_incomplete: bool = True,
) -> ViewQuery:
    """Check a request against the view definitions; raise ``QueryError`` saying what is wrong."""
    view = views.get(view_name)
    if view is None:
        raise UnknownView(f"no view {view_name!r} (views: {', '.join(sorted(views))})")
    if not 1 <= limit <= max_limit:
        raise QueryError(f"limit must be between 1 and {max_limit}, not {limit}")
    if offset < 0:
        raise QueryError(f"offset must be 0 or more, not {offset}")
    start_time = parse_time(start, "from") if start else None
    end_time = parse_time(end, "to") if end else None
    if start_time and end_time and start_time >= end_time:
        raise QueryError(f"empty time range: from {start_time.isoformat()} is not before "
                         f"to {end_time.isoformat()}")
    return ViewQuery(view, start_time, end_time, parse_filters(where or [], view), limit, offset,
                     serve_incomplete)


def run_query(snapshot: ViewSnapshot, query: ViewQuery) -> QueryResult:
    """One page of the merged answer, read from ``snapshot`` only."""
    view = query.view
    merged = merged_rows(snapshot, query)
    if merged is None:
        return QueryResult(view.name, [], None, describe(snapshot))
    order = [(column, "ascending") for column in ["window_start", *view.dimensions]]
    page = merged.sort_by(order).slice(query.offset, query.limit + 1)
    rows = json_columns(page).to_pylist()
    more = len(rows) > query.limit
    return QueryResult(view.name, rows[: query.limit],
                       query.offset + query.limit if more else None, describe(snapshot))


def merged_rows(snapshot: ViewSnapshot, query: ViewQuery) -> pa.Table | None:
    """Every row of the query's merged answer, unsorted (None: neither layer has a table
    yet): what a page is cut from, and what the SQL surface queries as the view."""
    view = query.view
    batch, realtime = layer_ranges(snapshot, query.start, query.end)
    sides = [(snapshot.batch_rows, "batch", batch),
             (snapshot.realtime_rows, "realtime", realtime)]
    columns = ["window_start", "window_end", *view.dimensions, *(m.name for m in view.measures)]
    parts = [_side(rows, source, snapshot, start, end, columns, query)
             for rows, source, ranges in sides if rows is not None
             for start, end in ranges or [(snapshot.high_water_mark, snapshot.high_water_mark)]]
    return pa.concat_tables(parts, promote_options="permissive") if parts else None


Range = tuple[datetime | None, datetime | None]
"""Windows starting in [start, end); None: unbounded."""


def layer_ranges(snapshot: ViewSnapshot, start: datetime | None,
                 end: datetime | None) -> tuple[list[Range], list[Range]]:
    """Where in [start, end) each layer answers: batch before the mark and in the intervals
    published beyond it, real-time in what lies between and after them."""
    mark = snapshot.high_water_mark
    batch: list[Range] = [(start, mark if end is None else min(end, mark))]
    realtime: list[Range] = []
    gap_start: datetime | None = mark if start is None else max(start, mark)
    for published_start, published_end in snapshot.batch_beyond_mark:
        batch.append((published_start if start is None else max(start, published_start),
                      published_end if end is None else min(end, published_end)))
        realtime.append((gap_start, published_start if end is None
                         else min(end, published_start)))
        gap_start = published_end if start is None else max(start, published_end)
    realtime.append((gap_start, end))
    return ([r for r in batch if _not_empty(r)], [r for r in realtime if _not_empty(r)])


def _not_empty(window_range: Range) -> bool:
    start, end = window_range
    return start is None or end is None or start < end


def _side(rows: pa.Table, source: str, snapshot: ViewSnapshot, start: datetime | None,
          end: datetime | None, columns: list[str], query: ViewQuery) -> pa.Table:
    """One layer's rows with windows starting in [start, end) that match the query's
    filters, each saying how complete it is (``completeness``); the real-time rows that are
    not, only if the query serves them."""
    chosen = rows_between(rows, start, end)
    for dimension, value in sorted(query.filters.items()):
        chosen = chosen.filter(pc.equal(pc.cast(chosen.column(dimension), pa.string()), value))
    realtime = source == "realtime"
    complete, late_rows = completeness(
        chosen, snapshot.realtime_completeness if realtime else snapshot.batch_completeness,
        realtime)
    answer = pa.table({
        **{c: chosen.column(c).cast(_UTC) if c.startswith("window_") else chosen.column(c)
           for c in columns},
        "source": pa.array([source] * chosen.num_rows, pa.string()),
        "as_of": chosen.column("updated_at" if realtime else "computed_at").cast(_UTC),
        "complete": complete,
        "late_rows": late_rows,
    })
    return answer if query.serve_incomplete or not realtime else answer.filter(complete)


def completeness(rows: pa.Table, known: Completeness, realtime: bool
                 ) -> tuple[pa.Array, pa.Array]:
    """Per row, whether its window's answer is whole, and the rows of its window's events
    known to be missing from it (``known.late_rows``). A batch row is whole unless late
    rows wait for its window; a real-time row also needs its window closed by the speed
    layer's watermark and to start at or after ``known.complete_from``."""
    starts = rows.column("window_start").cast(_UTC).cast(pa.int64())
    if known.late_rows:
        windows = sorted(known.late_rows)
        found = pc.index_in(starts, value_set=pa.array(
            [epoch_microseconds(w) for w in windows], pa.int64()))
        late = pc.fill_null(pc.take(pa.array([known.late_rows[w] for w in windows],
                                             pa.int64()), found), 0)
    else:
        late = pa.array(np.zeros(rows.num_rows, np.int64))
    complete = pc.equal(late, 0)
    if realtime:
        if known.watermark is None:  # nothing closed yet (or a shard without status)
            return pa.array(np.zeros(rows.num_rows, bool)), late
        ends = rows.column("window_end").cast(_UTC).cast(pa.int64())
        complete = pc.and_(complete, pc.less_equal(ends, epoch_microseconds(known.watermark)))
        if known.complete_from is not None:
            complete = pc.and_(complete,
                               pc.greater_equal(starts, epoch_microseconds(known.complete_from)))
    return complete, late


_UTC = pa.timestamp("us", tz="UTC")
_PRECISION = {"window_start": "s", "window_end": "s", "as_of": "ms"}


def json_columns(page: pa.Table) -> pa.Table:
    """The page with JSON's types, converted column by column in Arrow (not value by value in
    Python): windows as ISO-8601 UTC to the second, ``as_of`` to the millisecond, decimals as
    exact strings."""
    return pa.table({name: _json_column(name, column)
                     for name, column in zip(page.column_names, page.columns, strict=True)})


def _json_column(name: str, column: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """One column with JSON's types; a list's values too (``first_k``, ``last_k``, ``top_k``),
    and a struct's (``top_k``'s value and count, a SQL answer's structs)."""
    if pa.types.is_timestamp(column.type):
        unit = pa.timestamp(_PRECISION.get(name, "ms"), tz="UTC")
        return pc.strftime(column.cast(unit, safe=False), format="%Y-%m-%dT%H:%M:%SZ")
    if pa.types.is_decimal(column.type):
        return column.cast(pa.string())
    if pa.types.is_list(column.type) or pa.types.is_large_list(column.type):
        lists = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        values = _json_column(name, lists.values)
        return type(lists).from_arrays(lists.offsets, values, mask=lists.is_null())
    if pa.types.is_struct(column.type):
        struct = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        names = [struct.type.field(i).name for i in range(struct.type.num_fields)]
        return pa.StructArray.from_arrays(
            [_json_column(name, values) for values in struct.flatten()], names=names,
            mask=struct.is_null())
    return column


def describe(snapshot: ViewSnapshot) -> dict[str, Any]:
    """What a snapshot was read from: the boundary and both layers' versions."""
    return {
        "high_water_mark": json_value(snapshot.high_water_mark),
        "batch_beyond_mark": [[json_value(start), json_value(end)]
                              for start, end in snapshot.batch_beyond_mark],
        "batch": {"view_version": snapshot.view_version,
                  "delta_version": snapshot.batch_delta_version},
        "realtime": {"delta_version": snapshot.realtime_delta_version,
                     "newest_update": json_value(snapshot.realtime_newest),
                     "watermark": json_value(snapshot.realtime_completeness.watermark),
                     "complete_from": json_value(snapshot.realtime_completeness.complete_from)},
        "taken_at": json_value(snapshot.taken_at),
    }


def json_value(value: Any) -> Any:
    """A value as JSON has it: instants as ISO-8601 UTC, decimals as exact strings."""
    if isinstance(value, datetime):
        value = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    return value
