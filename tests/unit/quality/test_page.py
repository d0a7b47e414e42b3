"""The Data quality page: what it shows, that it needs no network, and that every route
depends on the authentication it is given (the plugin gives Airflow's)."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from fastapi import Header, HTTPException
from fastapi.testclient import TestClient

from lambdalake.quality.history import append, entry, record
from lambdalake.quality.page import create_quality_app
from lambdalake.quality.verdict import ExpectationOutcome, GateResult
from lambdalake.settings import Settings
from lambdalake.timeutil import iso_utc
from tests.support.settings_factory import MakeSettings

HOUR = datetime(2026, 11, 20, 10, tzinfo=UTC)


def require_token(authorization: str = Header("")) -> str:
    if authorization != "Bearer good":
        raise HTTPException(401, "Not authenticated")
    return "admin"


@pytest.fixture
def client(settings: Settings) -> TestClient:
    negative = ExpectationOutcome("amount_not_negative", "expect_column_values_to_be_between",
                                  "revenue", "critical", "revenue >= 0", None, 2, [-3, "<b>"])
    for hour, success in ((10, True), (11, False)):
        start = HOUR.replace(hour=hour)
        result = GateResult("batch", "product_sales", start, start.replace(hour=hour + 1),
                            success, [] if success else [negative], [], 17, 40)
        record(result, settings, run_id=f"manual__{hour}")
    app = create_quality_app(require_token, settings=lambda: settings)
    return TestClient(app, headers={"Authorization": "Bearer good"})


def test_the_overview_shows_trend_failures_and_samples(client: TestClient) -> None:
    page = client.get("/").text
    assert "product_sales" in page and "1 of 2" in page  # failed of recent runs
    assert page.count('class="mark passed"') == 1 and page.count('class="mark failed"') == 1
    assert "amount_not_negative" in page and "2 unexpected" in page and "-3" in page
    assert "&lt;b&gt;" in page and "<b>" not in page  # sample values are escaped
    assert "http://" not in page and "https://" not in page  # works offline


def test_a_runs_page_shows_only_that_runs_validations(client: TestClient) -> None:
    page = client.get("/runs/lambdalake_batch_views/manual__10").text
    assert "manual__10" in page and "manual__11" not in page
    assert "No failing expectations" in page
    empty = client.get("/runs/lambdalake_batch_views/other").text
    assert "recorded no validation" in empty


def test_the_overview_shows_the_late_rows_freshness_reports_and_recent_restatements(
    make_settings: MakeSettings,
) -> None:
    """The page's late rows are the look ``/freshness`` and ``make status`` report (the
    newest of any process): rows arriving after their hour was published show as waiting,
    and once the hour is published again from a bronze version holding them, as none,
    without waiting for the next restatement cycle."""
    from lambdalake.batch.restatement import record_restatement
    from tests.support.late_rows import arrive, hour, publish_from

    lake = make_settings(batch={"start_date": hour(0).date()},
                         serving={"late_rows_look_seconds": 0})
    client = TestClient(create_quality_app(require_token, settings=lambda: lake),
                        headers={"Authorization": "Bearer good"})
    publish_from(lake, arrive(lake, [("a", "page_view", 0.5)]), 0)
    late = arrive(lake, [("b", "page_view", 0.7), ("c", "page_view", 0.8)])
    page = client.get("/").text
    assert "<td>page_traffic</td><td class=warning>2</td><td>2</td><td>1</td>" in page
    assert f"<td>{iso_utc(hour(0))}</td>" in page
    assert "<td>funnel</td><td class=passed>0</td>" in page
    publish_from(lake, late, 0)  # restated
    record_restatement(lake, hour(0), hour(1),
                       {"page_traffic": {"rows": 2, "events": 2, "computed_from": 0}},
                       {"page_traffic": late}, "restate__2026-11-20T00:00:00Z__x")
    page = client.get("/").text
    assert "<td>page_traffic</td><td class=passed>0</td>" in page
    assert "Recent restatements (1 of 1)" in page and "restate__2026-11-20T00:00:00Z__x" in page
    assert f"<td>2</td><td>2</td><td>0 → {late}</td>" in page


def test_filters_narrow_the_overview(client: TestClient) -> None:
    assert "No validation recorded yet" in client.get("/", params={"layer": "bronze"}).text
    assert "product_sales" in client.get("/", params={"subject": "product_sales"}).text


def test_the_form_offers_every_layer_and_the_recorded_subjects_and_empty_means_every(
    client: TestClient,
) -> None:
    page = client.get("/", params={"layer": "batch", "subject": ""}).text
    form = page[page.index("<form"):page.index("</form>")]
    assert re.findall(r'<option value="([a-z_]+)"', form) == [
        "bronze", "reference", "batch", "realtime", "serving", "restatement", "product_sales"]
    assert '<option value="batch" selected>' in form
    assert "2 of 2" in page  # subject "" is every subject, not none


def test_a_subject_links_the_overview_narrowed_to_it_and_a_run_its_airflow_page(
    client: TestClient,
) -> None:
    page = client.get("/").text
    assert '<a href="?layer=batch&amp;subject=product_sales">product_sales</a>' in page
    for run in ("manual__10", "manual__11"):
        assert (f'<a href="/dags/lambdalake_batch_views/runs/{run}" target=_top>{run}</a>'
                in page)


def test_the_validations_page_through_newest_first(settings: Settings) -> None:
    for minute in range(5):
        start = HOUR.replace(minute=minute)
        record(GateResult("bronze", f"s{minute}", start, start.replace(minute=minute + 1),
                          True, [], [], 3, 10), settings, run_id=f"r{minute}")
    client = TestClient(create_quality_app(lambda: "admin", settings=lambda: settings))
    first = client.get("/", params={"limit": 2}).text
    assert "validations (2 of 5)" in first and "← newer" not in first
    assert [run for run in ("r4", "r3", "r2") if f">{run}</a>" in first] == ["r4", "r3"]
    older = re.search(r'<a href="([^"]+)">older →</a>', first)
    assert older is not None and older.group(1) == "?offset=2&amp;limit=2"
    second = client.get("/" + older.group(1).replace("&amp;", "&")).text
    assert "validations (3–4 of 5)" in second and "← newer" in second and "older →" in second
    assert [run for run in ("r3", "r2", "r1", "r0") if f">{run}</a>" in second] == ["r2", "r1"]
    last = client.get("/", params={"limit": 2, "offset": 4}).text
    assert "validations (5–5 of 5)" in last and "older →" not in last


def test_each_layers_runs_link_a_dag_the_platform_has() -> None:
    from lambdalake.quality.page import RUN_DAGS
    from lambdalake.quality.verdict import LAYERS
    from tests.support.repo import REPO

    dags = {match for path in (REPO / "dags").glob("*.py")
            for match in re.findall(r'dag_id="([a-z_]+)"', path.read_text())}
    assert set(RUN_DAGS) == set(LAYERS) and set(RUN_DAGS.values()) <= dags


def test_every_route_needs_the_authentication_it_was_given(client: TestClient) -> None:
    for path in ("/", "/runs/d/r"):
        assert client.get(path, headers={"Authorization": ""}).status_code == 401
        assert client.get(path).status_code == 200


def test_the_newest_interval_is_the_newest_in_event_time_not_the_last_recorded(
    client: TestClient, settings: Settings
) -> None:
    restated = GateResult("batch", "product_sales", HOUR.replace(hour=8), HOUR.replace(hour=9),
                          True, [], [], 17, 40)
    record(restated, settings, run_id="restate__08")  # recorded after 10:00 and 11:00
    page = client.get("/").text
    row = page[page.index(">product_sales</a></td>"):].split("</tr>")[0]  # per subject
    newest, its_verdict = re.findall(r"<td[^>]*>([^<]*)</td>", row)[0:2]
    assert (newest, its_verdict) == ("2026-11-20 11:00 – 2026-11-20 12:00",
                                     "FAILED: amount_not_negative")


def recorded(result: GateResult, at: str, run_id: str) -> dict[str, object]:
    """``result`` as the history keeps it, recorded at ``at`` (``HH:MM`` on the 20th)."""
    return {**entry(result, run_id=run_id), "recorded_at": f"2026-11-20T{at}:00+00:00"}


def test_failures_and_warnings_are_apart_and_a_repeated_warning_is_one_row(
    client: TestClient, settings: Settings
) -> None:
    """Three serving runs recorded the same drift warning for 10:00-11:00, a fourth for
    11:00-12:00: two rows, the first saying how often and when it was first recorded,
    apart from the batch failure; its sample rows a table with nested values as JSON."""
    drift = ExpectationOutcome(
        "drift:views:explained", "reconcile_realtime_with_batch", "views", "warning",
        "exact", unexpected_count=1, explained_by={"product": 1},
        samples=[{"window": "10:00", "batch": 237, "realtime": 153},
                 {"window": "10:00", "dimensions": {"page": "/a"}, "batch": None}])
    append(settings, [
        *(recorded(GateResult("serving", "page_traffic", HOUR, HOUR.replace(hour=11), True, [],
                              [drift], 4, 12), at, f"serving__{at}")
          for at in ("12:00", "12:05", "12:10")),
        recorded(GateResult("serving", "page_traffic", HOUR.replace(hour=11),
                            HOUR.replace(hour=12), True, [], [drift], 4, 12), "12:03", "s"),
    ])
    page = client.get("/").text
    failing = page[page.index("<h2>Failures (critical)"):page.index("<h2>Warnings")]
    warnings = page[page.index("<h2>Warnings"):page.index("<h2>Most recently recorded")]
    assert "amount_not_negative" in failing and "drift:views" not in failing
    assert "<h2>Warnings, most recently recorded first (2 of 2)</h2>" in warnings
    rows = warnings.split("<tr><td>serving page_traffic</td>")[1:]
    assert [re.findall(r"<td>(2026-11-20 1\d:00) – ", row) for row in rows] == [
        ["2026-11-20 10:00"], ["2026-11-20 11:00"]]  # the last recorded (12:10) first
    assert rows[0].endswith(
        "<td>2026-11-20 12:10:00<br><span class=muted>3 times, first 2026-11-20 12:00:00"
        "</span></td></tr>")
    assert rows[1].count("times, first") == 0
    assert "<td>1 unexpected, explained by 1 changed product key</td>" in rows[0]
    assert (
        "<table><thead><tr><th>window</th><th>batch</th><th>realtime</th><th>dimensions</th>"
        "</tr></thead><tbody><tr><td>10:00</td><td>237</td><td>153</td><td></td></tr>"
        "<tr><td>10:00</td><td>null</td><td></td><td>{&quot;page&quot;: &quot;/a&quot;}</td>"
        "</tr></tbody></table>") in rows[0]
    assert "{&#x27;" not in page and "{'" not in page  # no Python dict repr


def test_single_values_as_samples_are_a_one_column_table(client: TestClient) -> None:
    failing = client.get("/").text.split("<h2>Failures (critical)")[1].split("<h2>Warnings")[0]
    assert ("<table><thead><tr><th>value</th></tr></thead><tbody><tr><td>-3</td></tr>"
            "<tr><td>&lt;b&gt;</td></tr></tbody></table>") in failing
