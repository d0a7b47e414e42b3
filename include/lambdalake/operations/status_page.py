"""The "Pipeline status" page of the Airflow UI: one view of the whole platform's state,
mounted into Airflow's api-server by the plugin in ``plugins/`` beside Data quality.

It asks the query API for ``/freshness`` (the serving truth, from the snapshots the API
serves) and reads what the platform records: the publication log, the quality history,
the streams' batch histories, the quarantine table and Airflow's own DAG runs (the
plugin passes them in). ``lambdalake.operations.pipeline_status`` shapes the records;
charts are inline SVG, so nothing is loaded from the network.

Access control is the caller's, as on the Data quality page: ``create_status_app``
puts ``require_user`` on every route (the plugin passes Airflow's login).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from html import escape
from typing import Any

from fastapi import Depends, FastAPI
from fastapi.responses import HTMLResponse

from lambdalake.operations.charts import Series, line_chart
from lambdalake.operations.pipeline_status import (
    VERDICT_LAYERS,
    ViewStatus,
    batch_freshness,
    gate_durations,
    quarantine_rate,
    run_durations,
    serving_drift,
    stream_lag,
    verdict_text,
    view_statuses,
)
from lambdalake.quality.history import read_results
from lambdalake.quality.page import STYLE
from lambdalake.quality.report import status
from lambdalake.settings import Settings, get_settings

Runs = Callable[[], list[dict[str, Any]]]
"""Finished and running DAG runs: ``dag_id``, ``run_id``, ``start``, ``end`` (None while
running), ``state``."""

QUARANTINE_HOURS = 48
"""How many hours of arrival the quarantine chart covers, up to the current one."""
CHART_STYLE = (".chart text{fill:#57606a}figure{margin:.4rem 0 1rem}"
               ".key{display:inline-block;width:.7rem;height:.7rem;margin:0 .25rem 0 .8rem;"
               "border-radius:2px}figcaption{font-size:.85rem;color:#57606a}"
               "h3{font-size:1rem;margin:1.4rem 0 .2rem}")


@dataclass(frozen=True)
class PipelineState:
    views: list[ViewStatus]
    api_error: str | None
    charts: list[tuple[str, str, Series]]  # title, unit, series


def api_freshness(settings: Settings) -> dict[str, Any]:
    """The query API's ``/freshness``: per view, what serving answers from."""
    import httpx

    answer = httpx.get(f"{settings.serving.base_url}/freshness", timeout=10,
                       headers=settings.serving.auth_headers())
    answer.raise_for_status()
    freshness: dict[str, Any] = answer.json()
    return freshness


def collect(settings: Settings, runs: Runs, now: datetime,
            freshness: Callable[[Settings], dict[str, Any]] = api_freshness) -> PipelineState:
    """Everything the page shows, read now (delta-rs is imported here, not when the plugin
    loads)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from lambdalake.batch.publication import read_publications
    from lambdalake.ingest.status import QUERY_NAME as INGEST
    from lambdalake.lake.bronze import QUARANTINE_TABLE, count_bronze_arrivals
    from lambdalake.lake.delta_rs import read_rows
    from lambdalake.speed.shards import shards
    from lambdalake.streaming.progress import read_history
    from lambdalake.views.definition import load_views

    try:
        answered: dict[str, Any] | None = freshness(settings)
        api_error = None
    except Exception as error:  # noqa: BLE001 - the recorded history is worth showing
        answered, api_error = None, f"{type(error).__name__}: {error}"
    publications = read_publications(settings)
    results = read_results(settings)
    apps = [INGEST, *(shard.app for shard in shards(settings))]
    histories = {app: read_history(settings, app) for app in apps}
    until = now.astimezone(UTC).replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    since = until - timedelta(hours=QUARANTINE_HOURS)
    quarantined = read_rows(
        settings.table_path(QUARANTINE_TABLE),
        pa.schema([("kafka_timestamp", pa.timestamp("us", tz="UTC")),
                   ("quarantine_reason", pa.string())]),
        pc.field("kafka_timestamp") >= pa.scalar(since, pa.timestamp("us", tz="UTC")))
    return PipelineState(
        view_statuses(load_views(), answered, publications, results), api_error, [
            ("Batch freshness", "hours from the newest published interval's end to each "
             "publish", batch_freshness(publications)),
            ("Stream lag", "records left in Kafka after each micro-batch",
             stream_lag(histories)),
            ("Serving drift", "% of the keys each serving gate compared that drifted",
             serving_drift(results)),
            ("Quarantine rate by reason", "% of the records that arrived in each hour",
             quarantine_rate(quarantined, since, until,
                             lambda start, end: count_bronze_arrivals(settings, start, end))),
            ("Gate durations", "seconds per validation, by layer", gate_durations(results)),
            ("DAG run durations", "minutes per finished run", run_durations(runs())),
        ])


def status_page(state: PipelineState, now: datetime) -> str:
    """The page: the per-view table, then the charts."""
    note = ("" if state.api_error is None else
            f"<p class=failed>The query API did not answer /freshness: "
            f"{escape(state.api_error)}</p>")
    charts = "".join(line_chart(title, unit, series) for title, unit, series in state.charts)
    return (f"<!doctype html><html><head><meta charset=utf-8><title>Pipeline status</title>"
            f"<style>{STYLE}{CHART_STYLE}</style></head><body><h1>Pipeline status</h1>"
            f"<p class=muted>As of {now:%Y-%m-%d %H:%M:%S} UTC. Verdicts and failures in "
            f'detail: <a href="../lambdalake-quality/">Data quality</a>.</p>'
            f"<h2>Per view</h2>{note}{views_table(state.views, now)}"
            f"<h2>Over time</h2>{charts}</body></html>")


def views_table(views: list[ViewStatus], now: datetime) -> str:
    header = ["view", "high-water mark", "published beyond it", "last publish",
              "speed watermark", "speed lag (records)", "late drops", "rows waiting",
              *(f"last {layer} verdict" for layer in VERDICT_LAYERS)]
    rows = []
    for one in views:
        fresh = one.freshness or {}
        speed = fresh.get("speed") or {}
        beyond = ", ".join(f"[{_short(start)}, {_short(end)})"
                           for start, end in fresh.get("batch_beyond_mark") or [])
        waiting = fresh.get("late_rows_waiting")
        cells = [
            f'<a href="../lambdalake-quality/?subject={escape(one.view)}">'
            f"{escape(one.view)}</a>",
            escape(_short(fresh.get("high_water_mark"))), escape(beyond or "–"),
            escape(_ago(one.last_published, now)), escape(_short(speed.get("watermark"))),
            escape(_value(speed.get("lag"))),
            escape(_value(speed.get("dropped_by_watermark_total"))),
            f'<span class={"warning" if waiting else "passed"}>{escape(_value(waiting))}</span>',
        ]
        for layer in VERDICT_LAYERS:
            result = one.verdicts.get(layer)
            css = "muted" if result is None else status(result)
            cells.append(f'<span class="{css}">{escape(verdict_text(result))}</span>')
        rows.append("<tr>" + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>")
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def create_status_app(
    require_user: Callable[..., Any], runs: Runs,
    settings: Callable[[], Settings] = get_settings,
    freshness: Callable[[Settings], dict[str, Any]] = api_freshness,
) -> FastAPI:
    """The page's app: every route depends on ``require_user``; ``runs`` are the DAG runs
    whose durations it charts."""
    app = FastAPI(title="lambdalake pipeline status", dependencies=[Depends(require_user)],
                  docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/", response_class=HTMLResponse)
    def overview() -> str:
        now = datetime.now(UTC)
        return status_page(collect(settings(), runs, now, freshness), now)

    return app


def _short(moment: str | None) -> str:
    return "–" if not moment else moment[:16].replace("T", " ")


def _ago(moment: datetime | None, now: datetime) -> str:
    if moment is None:
        return "never"
    seconds = max(0.0, (now - moment).total_seconds())
    return (f"{seconds / 60:.0f} min ago" if seconds < 7200 else f"{seconds / 3600:.1f} h ago")


def _value(value: Any) -> str:
    return "–" if value is None else f"{value:,}" if isinstance(value, int) else str(value)
