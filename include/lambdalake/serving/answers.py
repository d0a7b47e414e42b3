"""The query API's answers as models, so its OpenAPI document says what each endpoint returns.

The handlers build plain JSON values (a rows page is serialised without FastAPI's encoder:
see ``api.rows``); these models document them, and the fuzz test holds every answer to
its model (schemathesis' response-schema check), so the document cannot drift from what
is served. Objects whose keys are known forbid others; a row also holds its view's own
dimensions and measures, so it allows them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class Closed(BaseModel):
    """An object with exactly these keys."""

    model_config = ConfigDict(extra="forbid")


class Health(Closed):
    status: Literal["ok"]
    last_refresh: float | None = Field(description="epoch seconds of the last good refresh")
    last_error: str | None = Field(description="why the last refresh failed, if it did")


class MeasureDescription(Closed):
    name: str
    kind: str
    column: str | None
    event_types: list[str] | None
    percentile: float | None
    k: int | None
    filter: str | None
    exact_in_speed_layer: bool
    speed_layer_rsd: float | None = Field(description="distinct_count: relative std. error")
    speed_layer_rank_error: float | None = Field(description="approx_percentile: rank error")
    speed_layer_relative_error: float | None = Field(description="moments: relative error")
    speed_layer_count_error: float | None = Field(
        description="top_k: count error, as a fraction of the values counted")


class ViewDescription(Closed):
    name: str
    description: str
    grain: str = Field(description="a window's length")
    slide: str = Field(description="how far apart windows start (the grain: tumbling)")
    lateness: str
    event_types: list[str]
    dimensions: list[str]
    filter: str | None
    columns: dict[str, str] = Field(description="derived columns: name -> expression")
    measures: list[MeasureDescription]


class BatchSide(Closed):
    view_version: int
    delta_version: int | None


class RealtimeSide(Closed):
    delta_version: int | None
    newest_update: str | None
    watermark: str | None
    complete_from: str | None


class Snapshot(Closed):
    """What an answer was read from: the boundary and both layers' versions."""

    high_water_mark: str
    batch_beyond_mark: list[list[str]] = Field(description="[start, end) pairs")
    batch: BatchSide
    realtime: RealtimeSide
    taken_at: str


class Row(BaseModel):
    """One window of a view: its dimensions and measures (by name) and these."""

    model_config = ConfigDict(extra="allow")

    window_start: str
    window_end: str
    source: Literal["batch", "realtime"]
    as_of: str
    complete: bool
    late_rows: int


class RowsPage(Closed):
    view: str
    rows: list[Row]
    next_offset: int | None
    snapshot: Snapshot


class SpeedState(Closed):
    batch_timestamp: str | None
    watermark: str | None
    complete_from: str | None
    lag: int | None
    dropped_by_watermark_total: int | None
    shards: dict[str, dict[str, Any]] | None = None


class ViewFreshness(Closed):
    high_water_mark: str
    batch_behind_seconds: float
    batch_beyond_mark: list[list[str]]
    batch_view_version: int
    realtime_delta_version: int | None
    realtime_newest_update: str | None
    realtime_age_seconds: float | None
    snapshot_age_seconds: float
    speed: SpeedState
    late_rows_waiting: int | None
    late_events_waiting: int | None
    oldest_waiting_window: str | None
    late_rows_waiting_since: str | None


class GateVerdict(BaseModel):
    """One recorded gate result (``lambdalake quality --format json``)."""

    model_config = ConfigDict(extra="allow")

    layer: str
    subject: str
    start: str
    end: str
    success: bool
    critical_failures: list[dict[str, Any]]
    warnings: list[dict[str, Any]]
    rows: int | None
    recorded_at: str


class SqlColumn(Closed):
    name: str
    type: str = Field(description="DuckDB's name of the column's type")


class SqlAnswer(Closed):
    """A query's rows as JSON objects, in the query's order."""

    columns: list[SqlColumn]
    rows: list[dict[str, Any]]
    truncated: bool = Field(description="more rows matched than max_rows")
    views: dict[str, Snapshot] = Field(description="per view queried, what it was read from")
