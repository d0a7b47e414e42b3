"""The "Data quality" page of the Airflow UI: a small FastAPI app that the plugin in
``plugins/`` mounts into Airflow's api-server.

It reads the gate results the layers record (``lambdalake.quality.history``) and renders
plain HTML with inline styles — nothing is loaded from the network, so the page works
offline. Pages:

- ``/`` — per layer and subject the newest data interval (in event time) with its
  verdict and a trend of the verdicts as recorded, the late rows waiting for restatement
  per view and the recent restatements, the failures and apart from them the warnings of
  the most recently recorded validations (one row per slice, interval and expectation,
  saying how often and when it was recorded, with sample rows as tables), and those
  validations;
  a form (``?layer=``, ``?subject=``) narrows it, each subject links it narrowed to that
  subject, ``?offset=`` and ``?limit=`` page through the validations, and each run id
  links the run's page in Airflow;
- ``/runs/{dag_id}/{run_id}`` — the validations of one DAG run (a tab of each run);
- ``/docs/{page}`` — the GX Data Docs page of each validation (``lambdalake.quality.docs``),
  the page of the suite it ran and the vendored files they load, behind the same login;
  ``/docs/index.html``, where the pages' *Home* link points, redirects to ``/``.

Access control is the caller's: ``create_quality_app(require_user, run_access)`` puts the
dependencies on the routes (the plugin passes Airflow's own, so only logged-in users see
the page, and a run's tab only those who may read that DAG's runs).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse

from lambdalake.quality.docs import docs_dir
from lambdalake.quality.history import read_results
from lambdalake.quality.report import (
    found,
    moment,
    outcomes,
    per_subject,
    recent,
    samples_table,
    status,
    verdict,
)
from lambdalake.settings import Settings, get_settings
from lambdalake.timeutil import iso_utc

if TYPE_CHECKING:
    from lambdalake.batch.late_arrivals import Waiting

TREND_LENGTH = 12
STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5rem;color:#1d2530}
h1{font-size:1.4rem}h2{font-size:1.1rem;margin-top:2rem}
table{border-collapse:collapse;width:100%;font-size:.9rem}
th,td{text-align:left;padding:.3rem .6rem;border-bottom:1px solid #dde2e8;vertical-align:top}
th{background:#f3f5f8}.passed{color:#1a7f37}.warning{color:#9a6700}.failed{color:#cf222e}
.mark{display:inline-block;width:.8rem;height:.8rem;margin-right:2px;border-radius:2px}
.mark.passed{background:#2da44e}.mark.warning{background:#d4a72c}.mark.failed{background:#cf222e}
code{background:#f3f5f8;padding:0 .2rem}.muted{color:#6e7781}
"""


def interval(result: dict[str, Any]) -> str:
    return f"{result['start'][:16].replace('T', ' ')} – {result['end'][:16].replace('T', ' ')}"


def latest_per_subject(results: list[dict[str, Any]], narrowing: bool = False) -> str:
    """One row per (layer, subject): its newest data interval and the verdict last recorded
    for it (a restatement of an older interval, recorded later, does not take its place),
    a trend of the recent verdicts in the order they were recorded, failures; with
    ``narrowing``, each subject links the overview narrowed to it."""
    rows = []
    for one in per_subject(results):
        subject = escape(one.subject)
        if narrowing:
            narrowed = urlencode({"layer": one.layer, "subject": one.subject})
            subject = f'<a href="?{escape(narrowed)}">{subject}</a>'
        trend = "".join(
            f'<span class="mark {status(r)}" title="{escape(interval(r))}: '
            f'{escape(verdict(r))}"></span>' for r in reversed(one.recorded[:TREND_LENGTH]))
        failed = sum(not r["success"] for r in one.recorded)
        rows.append(
            f"<tr><td>{escape(one.layer)}</td><td>{subject}</td>"
            f"<td>{escape(interval(one.newest))}</td>"
            f'<td class="{status(one.newest)}">{escape(verdict(one.newest))}</td>'
            f"<td>{trend}</td><td>{failed} of {len(one.recorded)}</td></tr>")
    return _table(["layer", "subject", "newest data interval", "its verdict",
                   f"last {TREND_LENGTH} recorded (earliest → latest)", "failed"], rows)


OUTCOMES = {"critical": ("Failures (critical)", "failed", "No failing expectations."),
            "warning": ("Warnings", "warning", "No warnings.")}


def expectation_outcomes(results: list[dict[str, Any]], severity: str,
                         limit: int = 30) -> str:
    """The section of the results' outcomes of one ``severity`` (``critical``: what failed
    a gate; ``warning``), most recently recorded first, one row per slice, interval and
    expectation: a check that warned on the same interval at every run is one row that
    says how often and when last."""
    title, css, none = OUTCOMES[severity]
    repeated = outcomes(results, severity)
    shown = repeated[:limit]
    heading = (f"<h2>{title}, most recently recorded first "
               f"({len(shown)} of {len(repeated)})</h2>")
    if not shown:
        return f'{heading}<p class="{"passed" if severity == "critical" else "muted"}">{none}</p>'
    rows = []
    for one in shown:
        result, outcome = one.result, one.outcome
        times = (f"<br><span class=muted>{one.times} times, first "
                 f"{escape(moment(one.first_recorded))}</span>" if one.times > 1 else "")
        rows.append(
            f"<tr><td>{escape(result['layer'])} {escape(result['subject'])}</td>"
            f"<td>{escape(interval(result))}</td>"
            f'<td class="{css}">{severity}</td><td><code>{escape(outcome["check"])}'
            f"</code><br><span class=muted>{escape(outcome.get('rule') or '')}</span>"
            f"</td><td>{escape(found(outcome))}</td>"
            f"<td>{samples_html(outcome.get('samples') or [])}</td>"
            f"<td>{escape(moment(result['recorded_at']))}{times}</td></tr>")
    return heading + _table(["slice", "interval", "severity", "expectation", "found",
                             "samples", "last recorded (UTC)"], rows)


def samples_html(samples: list[Any]) -> str:
    """An outcome's samples as a small table (``report.samples_table``), empty without."""
    if not samples:
        return ""
    header, rows = samples_table(samples)
    return _table(header, ["<tr>" + "".join(f"<td>{escape(value)}</td>" for value in row)
                           + "</tr>" for row in rows])


RUN_DAGS = {"bronze": "lambdalake_batch_views", "reference": "lambdalake_batch_views",
            "batch": "lambdalake_batch_views", "realtime": "lambdalake_speed_supervisor",
            "serving": "lambdalake_serving", "restatement": "lambdalake_restatement"}
"""The DAG whose runs record each layer's validations (a result's own ``dag_id`` wins)."""


def run_link(result: dict[str, Any], airflow_url: str | None) -> str:
    """The run that recorded ``result``, linking its page in the Airflow UI at
    ``airflow_url`` ("" on Airflow's own origin; None: no link)."""
    run_id = result.get("run_id")
    if not run_id:
        return ""
    dag = result.get("dag_id") or RUN_DAGS.get(result["layer"])
    if airflow_url is None or dag is None:
        return escape(run_id)
    href = f"{airflow_url}/dags/{dag}/runs/{quote(run_id, safe='')}"
    return f'<a href="{escape(href)}" target=_top>{escape(run_id)}</a>'


def validations(results: list[dict[str, Any]], docs_url: str = "docs",
                airflow_url: str | None = None) -> str:
    """One row per validation, most recently recorded first, linking its Data Docs page
    under ``docs_url`` and its run's page in Airflow (``run_link``)."""
    rows = []
    for result in recent(results, limit=len(results)):
        page = result.get("docs")
        docs = (f'<a href="{escape(docs_url)}/{escape(page)}" target=_blank>Data Docs</a>'
                if page else "")
        rows.append(
            f"<tr><td>{escape(moment(result['recorded_at']))}</td>"
            f"<td>{escape(result['layer'])}</td><td>{escape(result['subject'])}</td>"
            f"<td>{escape(interval(result))}</td><td>{result['rows']}</td>"
            f'<td class="{status(result)}">{escape(verdict(result))}</td>'
            f"<td>{result.get('seconds', '')}</td>"
            f"<td>{run_link(result, airflow_url)}</td><td>{docs}</td></tr>")
    return _table(["recorded (UTC)", "layer", "subject", "interval", "rows", "verdict",
                   "seconds", "run", "report"], rows)


def _table(header: list[str], rows: list[str]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _page(title: str, body: str) -> str:
    return (f"<!doctype html><html><head><meta charset=utf-8><title>{escape(title)}</title>"
            f"<style>{STYLE}</style></head><body><h1>{escape(title)}</h1>{body}</body></html>")


def late_rows_of(settings: Settings) -> str:
    """The ``late_rows`` section: the late rows waiting as ``/freshness`` and ``make
    status`` see them (the newest look of any process, ``LateArrivals.recent``), and the
    restatement log (delta-rs is imported here, not when the plugin loads)."""
    from lambdalake.batch.late_arrivals import LateArrivals
    from lambdalake.batch.restatement import read_restatements
    from lambdalake.views.definition import load_views

    age = settings.serving.late_rows_look_seconds
    try:
        waiting = LateArrivals(settings, list(load_views().values())).recent(age)
    except Exception as error:  # noqa: BLE001 - the rest of the page is worth showing
        note = f"<p class=failed>Could not look for late rows: {escape(str(error))}</p>"
        return note + late_rows([], read_restatements(settings))
    return (f"<p class=muted>Looked at most {age:g} s before this page.</p>"
            + late_rows(waiting, read_restatements(settings)))


def late_rows(waiting: list[Waiting], restatements: list[dict[str, Any]],
              limit: int = 10) -> str:
    """Per view, the late rows waiting; the latest restatements (interval, late rows taken
    in, run)."""
    shown = _table(
        ["view", "late rows", "events", "published windows", "oldest window",
         "waiting since"],
        [f"<tr><td>{escape(w.view)}</td><td class={'warning' if w.rows else 'passed'}>"
         f"{w.rows}</td><td>{w.events}</td><td>{len(w.windows)}</td>"
         f"<td>{_moment(w.oldest)}</td><td>{_moment(w.waiting_since)}</td></tr>"
         for w in sorted(waiting, key=lambda w: w.view)])
    latest = restatements[::-1][:limit]
    done = _table(["restated at", "view", "interval", "late rows", "events",
                   "bronze version", "run"],
                  [f"<tr><td>{r['restated_at']:%Y-%m-%d %H:%M:%S}</td>"
                   f"<td>{escape(r['view'])}</td><td>{r['interval_start']:%Y-%m-%d %H:%M} – "
                   f"{r['interval_end']:%Y-%m-%d %H:%M}</td><td>{r['late_rows']}</td>"
                   f"<td>{r['late_events']}</td><td>{r['computed_from']} → "
                   f"{r['bronze_version']}</td><td>{escape(r['run_id'])}</td></tr>"
                   for r in latest]) if latest else "<p class=muted>None yet.</p>"
    return shown + f"<h2>Recent restatements ({len(latest)} of {len(restatements)})</h2>" + done


def _moment(moment: datetime | None) -> str:
    return "–" if moment is None else escape(iso_utc(moment))


@dataclass(frozen=True)
class Narrowed:
    """The overview as asked for: one layer and/or one subject, and which page of the
    validations (``offset``, ``limit``), most recently recorded first."""

    layer: str | None = None
    subject: str | None = None
    offset: int = 0
    limit: int = 50

    def selects(self, result: dict[str, Any]) -> bool:
        return ((self.layer is None or result["layer"] == self.layer)
                and (self.subject is None or result["subject"] == self.subject))

    def href(self, **changes: Any) -> str:
        """This overview's query string, with ``changes``."""
        wanted = vars(replace(self, **changes))
        return "?" + urlencode({key: value for key, value in wanted.items()
                                if value is not None and value != vars(Narrowed())[key]})


def filters(results: list[dict[str, Any]], narrowed: Narrowed) -> str:
    """A form that narrows the overview to a layer and a subject (those recorded)."""
    from lambdalake.quality.verdict import LAYERS  # here: the verdict model imports delta-rs

    def select(name: str, options: list[str], chosen: str | None, every: str) -> str:
        items = "".join(f'<option value="{escape(o)}"{" selected" * (o == chosen)}>'
                        f"{escape(o)}</option>" for o in options)
        return f'<select name={name}><option value="">{every}</option>{items}</select>'

    subjects = sorted({r["subject"] for r in results
                       if narrowed.layer is None or r["layer"] == narrowed.layer})
    return ("<form method=get class=filters>layer "
            + select("layer", list(LAYERS), narrowed.layer, "every layer") + " subject "
            + select("subject", subjects, narrowed.subject, "every subject")
            + f'<input type=hidden name=limit value="{narrowed.limit}"> <button>Show</button> '
            + '<a href="?">all</a></form>')


def paging(total: int, narrowed: Narrowed) -> str:
    """Links to the newer and the older page of validations, where there is one."""
    links = []
    if narrowed.offset > 0:
        newer = max(0, narrowed.offset - narrowed.limit)
        links.append(f'<a href="{escape(narrowed.href(offset=newer))}">← newer</a>')
    if narrowed.offset + narrowed.limit < total:
        older = narrowed.offset + narrowed.limit
        links.append(f'<a href="{escape(narrowed.href(offset=older))}">older →</a>')
    return f"<p>{' · '.join(links)}</p>" if links else ""


def overview_page(results: list[dict[str, Any]], docs_url: str, limit: int = 50,
                  late: str = "", narrowed: Narrowed | None = None,
                  airflow_url: str | None = None) -> str:
    """The overview: per layer and subject, late rows (``late``: the ``late_rows``
    section), the failures and the warnings of a page of the most recently recorded
    validations, and those validations. ``narrowed`` (the plugin's page; None: the file
    ``make report`` writes, the ``limit`` newest) adds the form that narrows it, subject
    links and paging; run ids link their runs in Airflow at ``airflow_url``."""
    late = f"<h2>Late rows waiting for restatement</h2>{late}" if late else ""
    form = "" if narrowed is None else filters(results, narrowed)
    if narrowed is not None:
        results = [r for r in results if narrowed.selects(r)]
    if not results:
        return _page("Data quality", form + "<p class=muted>No validation recorded yet.</p>"
                     + late)
    offset, count = (0, limit) if narrowed is None else (narrowed.offset, narrowed.limit)
    shown = recent(results, limit=offset + count)[offset:]
    span = f"{offset + 1}–{offset + len(shown)}" if offset else f"{len(shown)}"
    more = "" if narrowed is None else paging(len(results), narrowed)
    return _page("Data quality", (
        form + "<h2>Per layer and subject</h2>"
        + latest_per_subject(results, narrowing=narrowed is not None) + late
        + expectation_outcomes(shown, "critical") + expectation_outcomes(shown, "warning")
        + f"<h2>Most recently recorded validations ({span} of {len(results)})</h2>"
        + more + validations(shown, docs_url, airflow_url) + more))


def write_report(settings: Settings, limit: int = 200) -> Path:
    """The overview as a static file beside the Data Docs pages it links (``index.html``)."""
    path = docs_dir(settings) / "index.html"
    path.parent.mkdir(parents=True, exist_ok=True)
    late = late_rows_of(settings)
    path.write_text(overview_page(read_results(settings), ".", limit, late,
                                  airflow_url=settings.airflow.base_url), encoding="utf-8")
    return path


def create_quality_app(
    require_user: Callable[..., Any], run_access: Callable[..., Any] | None = None,
    settings: Callable[[], Settings] = get_settings,
) -> FastAPI:
    """The page's app: every route depends on ``require_user`` (authentication), a run's
    page also on ``run_access`` (authorization to read that DAG's runs)."""
    app = FastAPI(title="lambdalake data quality", dependencies=[Depends(require_user)],
                  docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/", response_class=HTMLResponse)
    def overview(request: Request, layer: str | None = None, subject: str | None = None,
                 limit: int = 50, offset: int = 0) -> str:
        current = settings()
        narrowed = Narrowed(layer or None, subject or None, max(0, offset),
                            max(1, min(limit, 1000)))  # the form sends "" for "every"
        return overview_page(read_results(current), _docs_url(request),
                             late=late_rows_of(current), narrowed=narrowed, airflow_url="")

    @app.get("/runs/{dag_id}/{run_id}", response_class=HTMLResponse,
             dependencies=[Depends(run_access)] if run_access else [])
    def run_page(request: Request, dag_id: str, run_id: str) -> str:
        results = [r for r in read_results(settings()) if r.get("run_id") == run_id]
        title = f"Data quality of {dag_id} run {run_id}"
        if not results:
            return _page(title, "<p class=muted>This run recorded no validation.</p>")
        return _page(title, expectation_outcomes(results, "critical")
                     + expectation_outcomes(results, "warning") + "<h2>Validations</h2>"
                     + validations(results, _docs_url(request), airflow_url=""))

    @app.get("/docs/index.html")
    def docs_index(request: Request) -> RedirectResponse:
        """The Data Docs pages' *Home* (``../index.html``): under the plugin, the overview
        (the file ``make report`` writes there is the overview too, for reading offline)."""
        return RedirectResponse(f"{request.scope.get('root_path', '').rstrip('/')}/",
                                status_code=307)

    @app.get("/docs/{page:path}")
    def docs_file(page: str) -> FileResponse:
        """A Data Docs page or a file it loads; nothing outside the docs and assets dirs."""
        current = settings()
        wanted = (docs_dir(current) / page).resolve()
        allowed = [docs_dir(current).resolve(), Path(str(current.web_assets_dir)).resolve()]
        if not wanted.is_file() or not any(wanted.is_relative_to(root) for root in allowed):
            raise HTTPException(status_code=404, detail="no such Data Docs file")
        return FileResponse(wanted)

    return app


def _docs_url(request: Request) -> str:
    """Where ``/docs`` is, as the browser sees it (the app is mounted under a prefix)."""
    return f"{request.scope.get('root_path', '').rstrip('/')}/docs"
