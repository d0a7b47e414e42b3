"""Queries of the serving layer: validated, then answered from one snapshot of both layers.

A view's serving answer is its batch rows for windows before the batch high-water mark and
its real-time rows (each key's newest) for windows from the mark on, so no window is
counted by both layers or by neither. A query selects the windows that *start* in
``[start, end)``, optionally filtered on dimension values, ordered by window and
dimensions, one page at a time. Each row says which layer answered it (``source``) and as
of when (``as_of``: the batch computation or the real-time write).

Requests never reach SQL text: view, dimension and measure names are checked against the
view definitions (and quoted), values are bound parameters.

>>> query = parse_query(views, "page_traffic", start="2026-11-22T10:00Z", where=["page=/cart"])  # doctest: +SKIP
>>> run_query(store.get("page_traffic"), query).rows[0]["source"]           # doctest: +SKIP
'batch'
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any


from lambdalake.serving.snapshot import ViewSnapshot, quoted, rows_between, sql_cursor
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
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise QueryError(f"{name}={text!r} is not an ISO-8601 time "
                         "(e.g. 2026-11-22T10:00:00Z)") from None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


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
    max_limit: int = 1000,
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
    return ViewQuery(view, start_time, end_time, parse_filters(where or [], view), limit, offset)


def run_query(snapshot: ViewSnapshot, query: ViewQuery) -> QueryResult:
    """One page of the merged answer, read from ``snapshot`` only."""
    view = query.view
    mark = snapshot.high_water_mark
    columns = [*(f"CAST({c} AS TIMESTAMP) AS {c}" for c in ("window_start", "window_end")),
               *(quoted(c) for c in [*view.dimensions, *(m.name for m in view.measures)])]
    conditions, parameters = _conditions(query)
    parts = []
    with sql_cursor() as connection:
        for rows, source, as_of, start, end in (
            (snapshot.batch_rows, "batch", "computed_at", query.start,
             mark if query.end is None else min(query.end, mark)),
            (snapshot.realtime_rows, "realtime", "updated_at",
             mark if query.start is None else max(query.start, mark), query.end),
        ):
            if rows is None:
                continue
            # only the rows of this layer's side of the mark within the range reach DuckDB;
            # the conditions below repeat the range, so the answer never depends on the slice
            connection.register(f"{source}_rows", rows_between(rows, start, end))
            side = "window_start < $mark" if source == "batch" else "window_start >= $mark"
            parts.append(f"SELECT {', '.join(columns)}, '{source}' AS source, "
                         f"CAST({as_of} AS TIMESTAMP) AS as_of "
                         f"FROM {source}_rows WHERE {' AND '.join([side, *conditions])}")
        if not parts:
            return QueryResult(view.name, [], None, describe(snapshot))
        order = ", ".join(quoted(c) for c in ["window_start", *view.dimensions])
        sql = f"{' UNION ALL '.join(parts)} ORDER BY {order} LIMIT $limit OFFSET $offset"
        parameters.update(mark=mark, limit=query.limit + 1, offset=query.offset)
        cursor = connection.execute(sql, parameters)
        names = [d[0] for d in cursor.description]
        rows = [dict(zip(names, map(json_value, row), strict=True)) for row in cursor.fetchall()]
    more = len(rows) > query.limit
    return QueryResult(view.name, rows[: query.limit],
                       query.offset + query.limit if more else None, describe(snapshot))


def _conditions(query: ViewQuery) -> tuple[list[str], dict[str, Any]]:
    conditions, parameters = [], {}
    if query.start:
        conditions.append("window_start >= $start")
        parameters["start"] = query.start
    if query.end:
        conditions.append("window_start < $end")
        parameters["end"] = query.end
    for index, (dimension, value) in enumerate(sorted(query.filters.items())):
        conditions.append(f"CAST({quoted(dimension)} AS VARCHAR) = $f{index}")
        parameters[f"f{index}"] = value
    return conditions, parameters


def describe(snapshot: ViewSnapshot) -> dict[str, Any]:
    """What a snapshot was read from: the boundary and both layers' versions."""
    return {
        "high_water_mark": json_value(snapshot.high_water_mark),
        "batch": {"view_version": snapshot.view_version,
                  "delta_version": snapshot.batch_delta_version},
        "realtime": {"delta_version": snapshot.realtime_delta_version,
                     "newest_update": json_value(snapshot.realtime_newest)},
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
