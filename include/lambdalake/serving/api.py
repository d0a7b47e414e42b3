"""The query API: JSON over HTTP, served from in-memory snapshots of Delta (no JVM).

Endpoints (the OpenAPI document is at ``/openapi.json``, interactive docs at ``/docs``):

- ``GET /views`` and ``GET /views/{view}``: the views, their dimensions and measures (and
  which measures the speed layer approximates, with what error);
- ``GET /views/{view}/rows?from=&to=&where=page=/cart&limit=&offset=``: one page of the
  merged answer (see ``lambdalake.serving.query``);
- ``GET /freshness``: per view, the batch high-water mark, the newest real-time write and
  the speed layer's own status; ``GET /health``;
- ``GET /quality/results?layer=&subject=&failed=&limit=``: the recorded quality-gate
  verdicts, most recently recorded first (``lambdalake.quality.report.recent``);
- ``POST /sql``: a read-only SQL query over the merged views (``lambdalake.serving.sql``);
- ``GET /metrics``: the platform's state for Prometheus (``lambdalake.serving.metrics``).

With ``serving.api_token`` set, every route but ``/health`` (and the OpenAPI document)
needs ``Authorization: Bearer <token>``; production refuses to start without one.

A background thread refreshes the snapshots every ``serving.refresh_seconds``, and on a
local lake as soon as a real-time table has a new commit (looked for every
``serving.commit_poll_seconds``); a request only reads the newest snapshot, so it never
waits for storage. A refresh that fails keeps
the previous snapshots and shows in ``/health``.
"""

from __future__ import annotations

import hmac
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, FastAPI, Header, HTTPException, Query
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi.staticfiles import StaticFiles
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder
from pydantic import BaseModel, Field, SecretStr, WithJsonSchema

from lambdalake.batch.late_arrivals import LateArrivals
from lambdalake.quality.docs import CDN_ASSETS, local_name
from lambdalake.quality.history import read_results, read_verdicts
from lambdalake.quality.report import recent
from lambdalake.quality.verdict import LAYERS
from lambdalake.serving.answers import (
    GateVerdict,
    Health,
    RowsPage,
    SqlAnswer,
    ViewDescription,
    ViewFreshness,
)
from lambdalake.serving.freshness import view_freshness
from lambdalake.serving.metrics import PlatformCollector
from lambdalake.serving.query import QueryError, UnknownView, parse_query, run_query
from lambdalake.serving.snapshot import SnapshotStore
from lambdalake.serving.sql import NoRowsYet, SqlBusy, SqlError, SqlRunner
from lambdalake.settings import Settings, get_settings
from lambdalake.speed.shards import speed_status
from lambdalake.stack.secrets import MissingSecret
from lambdalake.views.definition import ViewDefinition, load_views

log = logging.getLogger(__name__)


class Problem(BaseModel):
    """What a refused request gets: the reason, and what to change."""

    detail: str


NO_VIEW: dict[int | str, dict[str, Any]] = {
    404: {"model": Problem, "description": "No such view"}}
BAD_QUERY: dict[int | str, dict[str, Any]] = {
    400: {"model": Problem, "description": "A filter, time range or page the view cannot take"}}
NO_SNAPSHOT: dict[int | str, dict[str, Any]] = {
    503: {"model": Problem, "description": "No snapshot could be read yet"}}

# a time is declared as one, so generated clients and the fuzzer send times (edge years and
# offsets included); the handler still takes any string and refuses what it cannot parse
TimeText = Annotated[str, WithJsonSchema({"type": "string", "format": "date-time"})]



class SqlRequest(BaseModel):
    """A read-only query over the views (each view's merged answer is a table)."""

    sql: str = Field(max_length=20_000, examples=[
        "SELECT page, sum(views) AS views FROM page_traffic GROUP BY page ORDER BY views DESC"])
    max_rows: int | None = Field(None, ge=1, description="at most this many rows (and never "
                                 "more than serving.sql_max_rows)")


SQL_REFUSED: dict[int | str, dict[str, Any]] = {
    400: {"model": Problem, "description": "Not one read-only query over the views, or one "
          "DuckDB could not answer within the limits"},
    503: {"model": Problem, "description": "A view has no rows yet, or every query slot "
          "stayed busy"}}

NO_TOKEN: dict[int | str, dict[str, Any]] = {
    401: {"model": Problem, "description": "Missing or wrong bearer token"}}
BEARER = HTTPBearer(auto_error=False, description="serving.api_token, when configured")


def token_guard(token: SecretStr | None) -> Callable[..., None]:
    """A dependency that lets a request in only with ``Authorization: Bearer <token>``
    (compared in constant time); it lets everything in when no token is configured."""
    expected = token.get_secret_value().encode() if token else None

    def check(credentials: HTTPAuthorizationCredentials | None = Depends(BEARER)) -> None:
        if expected is None:
            return
        given = credentials.credentials.encode() if credentials else b""
        if not hmac.compare_digest(given, expected):
            raise HTTPException(401, "this API needs 'Authorization: Bearer <token>' "
                                     "(the serving.api_token setting)",
                                headers={"WWW-Authenticate": "Bearer"})

    return check


def describe_view(view: ViewDefinition) -> dict[str, Any]:
    """A view's schema as the API and the CLI show it."""
    return {
        "name": view.name, "description": view.description, "grain": view.grain,
        "slide": view.slide or view.grain, "lateness": view.lateness,
        "event_types": view.event_types,
        "dimensions": view.dimensions, "filter": view.filter, "columns": view.columns,
        "measures": [{
            "name": m.name, "kind": m.kind, "column": m.column, "event_types": m.event_types,
            "percentile": m.percentile, "k": m.k, "filter": m.filter,
            "exact_in_speed_layer": m.exact_in_speed_layer, "speed_layer_rsd": None,
            "speed_layer_rank_error": None, "speed_layer_relative_error": None,
            "speed_layer_count_error": None,
            **m.measure_kind.stated_error(view),
        } for m in view.measures],
    }


class Refresher:
    """Refreshes a store every ``interval`` seconds in a daemon thread, and as soon as a
    real-time table commits (looked for every ``poll`` seconds, unless None); remembers
    failures."""

    def __init__(self, store: SnapshotStore, interval: float, poll: float | None) -> None:
        self.store = store
        self.interval = interval
        self.poll = poll
        self.last_success: float | None = None
        self.last_error: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="snapshot-refresh", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.store.refresh()
                self.last_success, self.last_error = time.time(), None
            except Exception as error:  # noqa: BLE001 - keep serving the last snapshots
                self.last_error = f"{type(error).__name__}: {error}"
                log.warning("snapshot refresh failed: %s", self.last_error)
            self._wait_for_change()

    def _wait_for_change(self) -> None:
        """Until the interval is over, a real-time table has committed, or stop: so a
        speed-layer commit is served within ``poll`` seconds, not up to an interval later."""
        if self.poll is None:
            self._stop.wait(self.interval)
            return
        deadline = time.monotonic() + self.interval
        while not self._stop.wait(min(self.poll, max(0.0, deadline - time.monotonic()))):
            if time.monotonic() >= deadline:
                return
            try:
                if self.store.realtime_moved():
                    return
            except Exception as error:  # noqa: BLE001 - the refresh will report it
                log.debug("looking for a real-time commit failed: %s", error)


DOCS_ASSETS = "/docs-assets"
"""Where the API serves the web assets setup fetched (Swagger UI's among them)."""


def offline_swagger_ui(title: str) -> HTMLResponse:
    """FastAPI's Swagger UI page with each CDN URL it loads replaced by its local copy (a
    FastAPI that loads another URL fails here, in ``CDN_ASSETS``, rather than go online)."""
    default = {name: get_swagger_ui_html.__kwdefaults__[name]  # type: ignore[index]
               for name in ("swagger_js_url", "swagger_css_url", "swagger_favicon_url")}
    local = {name: f"{DOCS_ASSETS}/{local_name(*CDN_ASSETS[url])}"
             for name, url in default.items()}
    return get_swagger_ui_html(
        openapi_url="/openapi.json", title=f"{title} - Swagger UI",
        swagger_js_url=local["swagger_js_url"], swagger_css_url=local["swagger_css_url"],
        swagger_favicon_url=local["swagger_favicon_url"])


def create_app(settings: Settings | None = None) -> FastAPI:
    """The API over the lake ``settings`` names (the stack runs ``uvicorn --factory``)."""
    settings = settings or get_settings()
    if settings.serving.api_token is None and settings.environment != "local":
        raise MissingSecret("the query API needs LAMBDALAKE_SERVING__API_TOKEN outside local "
                            f"development (LAMBDALAKE_ENVIRONMENT={settings.environment})")
    views = load_views()
    store = SnapshotStore(settings, views)
    refresher = Refresher(store, settings.serving.refresh_seconds,
                          settings.serving.commit_poll_seconds)
    late_arrivals = LateArrivals(settings, list(views.values()))

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        refresher.start()
        yield
        refresher.stop()

    app = FastAPI(title="lambdalake query API", lifespan=lifespan, docs_url=None,
                  description="Merged batch + real-time views of the lambdalake platform.")
    app.mount(DOCS_ASSETS, StaticFiles(directory=settings.web_assets_dir, check_dir=False),
              name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    def docs() -> HTMLResponse:
        """Swagger UI, loaded from the copies setup fetched (``vendor_assets``): it works
        where the machine reaches no CDN."""
        return offline_swagger_ui(app.title)
    guarded = APIRouter(dependencies=[Depends(token_guard(settings.serving.api_token))],
                        responses=NO_TOKEN)

    def view_or_404(name: str) -> ViewDefinition:
        if name not in views:
            raise HTTPException(404, f"no view {name!r} (views: {', '.join(sorted(views))})")
        return views[name]

    @app.get("/health", response_model=None, responses={200: {"model": Health}, **NO_SNAPSHOT})
    def health() -> dict[str, Any]:
        """Whether snapshots are being refreshed (503 while none was taken)."""
        if refresher.last_success is None and refresher.last_error is not None:
            raise HTTPException(503, f"no snapshot yet: {refresher.last_error}")
        return {"status": "ok", "last_refresh": refresher.last_success,
                "last_error": refresher.last_error}

    @guarded.get("/views", response_model=None,
                 responses={200: {"model": list[ViewDescription]}})
    def list_views() -> list[dict[str, Any]]:
        return [describe_view(views[name]) for name in sorted(views)]

    @guarded.get("/views/{view}", response_model=None,
                 responses={200: {"model": ViewDescription}, **NO_VIEW})
    def get_view(view: str) -> dict[str, Any]:
        return describe_view(view_or_404(view))

    @guarded.get("/views/{view}/rows",
                 responses={200: {"model": RowsPage}, **NO_VIEW, **BAD_QUERY})
    async def rows(
        view: str,
        start: Annotated[TimeText | None, Query(alias="from", description="ISO-8601, "
                                                "inclusive: windows starting at or after it")
                         ] = None,
        end: Annotated[TimeText | None, Query(alias="to", description="ISO-8601, exclusive")
                       ] = None,
        where: Annotated[list[str] | None, Query(description="DIMENSION=VALUE, repeatable")] = None,
        limit: Annotated[int, Query(description="rows per page")] = settings.serving.default_limit,
        offset: Annotated[int, Query(description="rows to skip (next_offset of a page)")] = 0,
    ) -> JSONResponse:
        """One page of the view: batch rows where a published slice covers the window,
        real-time rows elsewhere. Each row says its ``source``, ``as_of``, and whether its
        window is whole (``complete``; ``late_rows``: rows of its events known to be
        missing): docs/serving.md says what that means.

        ``async`` although it computes: a query takes under a millisecond of CPU on an
        in-memory snapshot, less than handing it to a worker thread and back costs."""
        try:
            query = parse_query(views, view, start=start, end=end, where=where, limit=limit,
                                offset=offset, max_limit=settings.serving.max_limit,
                                serve_incomplete=settings.serving.serves_incomplete)
        except UnknownView as error:
            raise HTTPException(404, str(error)) from None
        except QueryError as error:
            raise HTTPException(400, str(error)) from None
        result = run_query(store.get(view), query)
        # rows hold JSON values already (json_value): serialised as they are, without
        # FastAPI's per-value encoder walk, which cost as much as the query
        return JSONResponse({"view": result.view, "rows": result.rows,
                             "next_offset": result.next_offset, "snapshot": result.snapshot})

    @guarded.get("/freshness", response_model=None,
                 responses={200: {"model": dict[str, ViewFreshness]}})
    def freshness() -> dict[str, Any]:
        """Per view: where batch ends, how recent real-time is, the speed layer's state.
        Ages are measured after the snapshots are read, so none is negative however the
        refresher races this request."""
        snapshots = {name: store.get(name) for name in sorted(views)}
        speed = speed_status(settings).get("views", {})
        waiting = {w.view: w for w in late_arrivals.recent(settings.serving.late_rows_look_seconds)}
        now = datetime.now(UTC)
        return {name: view_freshness(snapshot, speed.get(name, {}), now, waiting[name])
                for name, snapshot in snapshots.items()}

    @guarded.get("/quality/results", response_model=None,
                 responses={200: {"model": list[GateVerdict]}, **BAD_QUERY})
    def quality_results(
        layer: Annotated[Literal[LAYERS] | None, Query(  # type: ignore[valid-type]
            description="only this layer's gates")] = None,
        subject: Annotated[str | None, Query(
            description="only this view's (or bronze_events') gates", max_length=200)] = None,
        failed: Annotated[bool, Query(description="only the gates that failed")] = False,
        limit: Annotated[int, Query(
            ge=1, le=1000, description="results, most recently recorded first")] = 20,
    ) -> list[dict[str, Any]]:
        """The recorded quality-gate verdicts, most recently recorded first: layer, subject,
        interval, success, failing expectations with samples, rows, run id, Data Docs page
        (as ``lambdalake quality --format json``)."""
        return recent(read_results(settings), layer, limit, subject=subject, failed_only=failed)

    sql = SqlRunner(store, views, settings.serving)

    @guarded.post("/sql", responses={200: {"model": SqlAnswer}, **SQL_REFUSED})
    def run_sql(request: SqlRequest) -> JSONResponse:
        """A read-only SQL query (DuckDB's dialect) over the merged views, read from the
        snapshots the rows API serves: each view a table of its rows with ``source``,
        ``as_of``, ``complete`` and ``late_rows``. docs/serving.md says what is refused and
        the limits."""
        try:
            answer = sql.answer(request.sql, request.max_rows)
        except SqlError as error:
            raise HTTPException(400, str(error)) from None
        except (NoRowsYet, SqlBusy) as error:
            raise HTTPException(503, str(error)) from None
        return JSONResponse({"columns": answer.columns, "rows": answer.rows,
                             "truncated": answer.truncated, "views": answer.views})

    registry = CollectorRegistry()
    registry.register(PlatformCollector(
        lambda: {name: store.get(name) for name in sorted(views)},
        lambda: {w.view: w for w in late_arrivals.recent(
            settings.serving.late_rows_look_seconds)},
        lambda: read_verdicts(settings)))

    @guarded.get("/metrics", response_class=Response, responses={200: {
        "description": "Prometheus' text exposition format",
        "content": {"text/plain": {"schema": {"type": "string"}}}}})
    def metrics(accept: Annotated[str | None, Header(include_in_schema=False)] = None
                ) -> Response:
        """Per view the high-water mark and its age, what was published beyond it, the late
        rows waiting and the newest real-time write; the recorded gate verdicts per layer
        and each subject's newest (docs/operations/metrics.md). In the format the scraper
        accepts (Prometheus' text format unless it asks for OpenMetrics)."""
        encode, content_type = choose_encoder(accept or "")
        return Response(encode(registry), media_type=content_type)

    app.include_router(guarded)
    return app
