"""The query API over small Delta tables (FastAPI's test client; no server, no JVM)."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from lambdalake.serving.api import create_app
from lambdalake.settings import Settings
from lambdalake.stack.secrets import MissingSecret
from lambdalake.views.definition import load_views
from tests.support.serving_tables import append_realtime, publish_hours, write_batch
from tests.support.settings_factory import MakeSettings


@pytest.fixture
def client(make_settings: MakeSettings) -> Iterator[TestClient]:
    lake = make_settings(batch={"start_date": "2026-11-20"}, serving={"refresh_seconds": 0.05})
    write_batch(lake, [(0, "/a", 10), (1, "/a", 11)])
    publish_hours(lake, 0)
    append_realtime(lake, 0, [(0, "/a", 9), (1, "/a", 12)])
    with TestClient(create_app(lake)) as client:
        yield client


def test_rows_are_merged_at_the_high_water_mark(client: TestClient) -> None:
    body = client.get("/views/page_traffic/rows", params={"where": "page=/a"}).json()
    assert [(r["window_start"], r["views"], r["source"]) for r in body["rows"]] == [
        ("2026-11-20T00:00:00Z", 10, "batch"), ("2026-11-20T01:00:00Z", 12, "realtime")]
    assert body["snapshot"]["high_water_mark"] == "2026-11-20T01:00:00Z"
    assert body["next_offset"] is None


def test_new_realtime_rows_show_within_a_refresh(client: TestClient, settings: Settings) -> None:
    append_realtime(settings, 1, [(2, "/a", 1)])
    deadline = time.monotonic() + 10
    while len(client.get("/views/page_traffic/rows").json()["rows"]) < 3:
        assert time.monotonic() < deadline, "the new row never appeared"
        time.sleep(0.05)


def test_a_realtime_commit_is_served_without_waiting_for_the_refresh_interval(
    make_settings: MakeSettings
) -> None:
    """The refresh interval is a minute; the new commit is looked for every 10 ms."""
    lake = make_settings(batch={"start_date": "2026-11-20"},
                         serving={"refresh_seconds": 60, "commit_poll_seconds": 0.01})
    write_batch(lake, [(0, "/a", 10)])
    publish_hours(lake, 0)
    append_realtime(lake, 0, [(1, "/a", 12)])
    with TestClient(create_app(lake)) as client:
        assert len(client.get("/views/page_traffic/rows").json()["rows"]) == 2
        append_realtime(lake, 1, [(2, "/a", 1)])
        deadline = time.monotonic() + 10
        while len(client.get("/views/page_traffic/rows").json()["rows"]) < 3:
            assert time.monotonic() < deadline, "the commit waited for the refresh interval"
            time.sleep(0.02)


@pytest.mark.parametrize(("path", "params", "status", "message"), [
    ("/views/nope/rows", {}, 404, "no view 'nope'"),
    ("/views/nope", {}, 404, "no view 'nope'"),
    ("/views/page_traffic/rows", {"where": "colour=red"}, 400, "no dimension 'colour'"),
    ("/views/page_traffic/rows", {"from": "soon"}, 400, "not an ISO-8601 time"),
    ("/views/page_traffic/rows", {"from": "2026-11-21", "to": "2026-11-20"}, 400, "empty time"),
    ("/views/page_traffic/rows", {"limit": 100_000}, 400, "limit must be between 1 and 1000"),
    ("/views/page_traffic/rows", {"limit": "many"}, 422, "integer"),
    # instants that exist only before UTC's year 1 or after its year 9999
    ("/views/page_traffic/rows", {"from": "0001-01-01T00:00:00+01:00"}, 400, "years 1 to 9999"),
    ("/views/page_traffic/rows", {"from": "9999-12-31T23:59:59-01:00"}, 400, "years 1 to 9999"),
    ("/views/page_traffic/rows", {"to": "0001-01-01T00:00:00+14:00"}, 400, "years 1 to 9999"),
])
def test_bad_requests_get_a_4xx_that_says_why(
    client: TestClient, path: str, params: dict, status: int, message: str
) -> None:
    response = client.get(path, params=params)
    assert response.status_code == status
    assert message in str(response.json()["detail"])


def test_views_freshness_and_openapi(client: TestClient) -> None:
    views = {v["name"]: v for v in client.get("/views").json()}
    assert set(views) == {"funnel", "order_value", "page_traffic", "page_traffic_by_segment",
                          "page_traffic_rolling", "product_sales", "product_sales_by_category"}
    assert (views["page_traffic_rolling"]["grain"], views["page_traffic_rolling"]["slide"],
            views["page_traffic"]["slide"]) == ("1 hour", "15 minutes", "1 hour")
    order_value = views["order_value"]
    assert (order_value["filter"], order_value["columns"]["unit_price"]) == (
        "amount >= 10", "amount / quantity")
    spread = next(m for m in order_value["measures"] if m["name"] == "order_spread")
    assert (spread["kind"], spread["speed_layer_relative_error"]) == ("stddev", 1e-9)
    bulk = next(m for m in order_value["measures"] if m["name"] == "bulk_revenue")
    assert bulk["filter"] == "quantity >= 3"
    unique_users = next(m for m in views["page_traffic"]["measures"] if m["name"] == "unique_users")
    assert unique_users["exact_in_speed_layer"] is False and unique_users["speed_layer_rsd"] > 0
    freshness = client.get("/freshness").json()["page_traffic"]
    assert freshness["high_water_mark"] == "2026-11-20T01:00:00Z"
    assert freshness["batch_beyond_mark"] == []  # nothing published past a gap
    assert freshness["realtime_newest_update"] is not None
    assert (freshness["late_rows_waiting"], freshness["oldest_waiting_window"]) == (0, None)
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/views", "/views/{view}", "/views/{view}/rows", "/freshness", "/health"} <= set(paths)


@pytest.fixture
def guarded_client(make_settings: MakeSettings) -> Iterator[TestClient]:
    lake = make_settings(batch={"start_date": "2026-11-20"},
                         serving={"refresh_seconds": 0.05, "api_token": "s3cret-token"})
    write_batch(lake, [(0, "/a", 10)])
    publish_hours(lake, 0)
    with TestClient(create_app(lake)) as client:
        yield client


@pytest.mark.parametrize("path", ["/views", "/views/page_traffic", "/views/page_traffic/rows",
                                  "/freshness", "/quality/results"])
def test_with_a_token_configured_every_data_route_needs_it(guarded_client: TestClient,
                                                          path: str) -> None:
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic czNjcmV0"}):
        refused = guarded_client.get(path, headers=headers)
        assert refused.status_code == 401, (headers, refused.text)
        assert refused.headers["WWW-Authenticate"] == "Bearer"
        assert "s3cret" not in refused.text
    assert guarded_client.get(path, headers={"Authorization": "Bearer s3cret-token"}
                              ).status_code == 200


def test_health_and_the_openapi_document_stay_open(guarded_client: TestClient) -> None:
    assert guarded_client.get("/health").status_code == 200
    document = guarded_client.get("/openapi.json").json()
    assert "HTTPBearer" in document["components"]["securitySchemes"]


def test_production_refuses_to_serve_without_a_token(make_settings: MakeSettings) -> None:
    with pytest.raises(MissingSecret, match="LAMBDALAKE_SERVING__API_TOKEN"):
        create_app(make_settings(environment="production"))


def test_the_interactive_docs_load_only_the_assets_setup_fetched(
    make_settings: MakeSettings, tmp_path: Path
) -> None:
    """``/docs`` names no URL beyond the API itself, and each asset it names is served from
    the web assets dir (setup fills it from the npm registry, as for Data Docs)."""
    from lambdalake.quality.docs import CDN_ASSETS, local_name

    assets = tmp_path / "web-assets"
    for spec, path in CDN_ASSETS.values():
        (assets / local_name(spec, path)).parent.mkdir(parents=True, exist_ok=True)
        (assets / local_name(spec, path)).write_text(f"/* {spec} {path} */")
    with TestClient(create_app(make_settings(web_assets_dir=assets))) as client:
        page = client.get("/docs")
        assert page.status_code == 200
        loaded = re.findall(r"""(?:src|href|url)\s*[:=]\s*['"]([^'"]+)['"]""", page.text)
        assert sorted(set(loaded)) == [
            "/docs-assets/swagger-ui-dist@5.35.0/favicon-32x32.png",
            "/docs-assets/swagger-ui-dist@5.35.0/swagger-ui-bundle.js",
            "/docs-assets/swagger-ui-dist@5.35.0/swagger-ui.css", "/openapi.json"]
        assert "http" not in page.text  # no CDN left, no absolute URL at all
        for url in loaded:
            assert client.get(url).status_code == 200, url
        assert client.get("/docs-assets/../secrets/x").status_code == 404


def test_freshness_ages_are_never_negative_when_a_refresh_races_the_request(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The refresher may swap in a snapshot taken while ``/freshness`` is answering: its age
    is measured after it was read."""
    from lambdalake.serving.snapshot import SnapshotStore

    take_anew = SnapshotStore.get

    def refreshed_just_now(store: SnapshotStore, view_name: str):  # type: ignore[no-untyped-def]
        store.refresh()
        return take_anew(store, view_name)

    monkeypatch.setattr(SnapshotStore, "get", refreshed_just_now)
    ages = [fresh["snapshot_age_seconds"] for fresh in client.get("/freshness").json().values()]
    assert len(ages) == len(load_views()) and min(ages) >= 0, ages


def test_the_openapi_document_names_a_model_for_every_answer(client: TestClient) -> None:
    """Every endpoint's 200 declares its schema (the fuzz test then holds answers to it):
    no answer is the empty schema a handler returning a JSONResponse gets by default."""
    document = client.get("/openapi.json").json()
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            content = operation["responses"]["200"]["content"]
            schema = next(iter(content.values()))["schema"]
            assert schema not in ({}, {"type": "object"}), (method, path, schema)
    rows = document["paths"]["/views/{view}/rows"]["get"]["responses"]["200"]["content"]
    assert rows["application/json"]["schema"] == {"$ref": "#/components/schemas/RowsPage"}
    assert set(document["components"]["schemas"]["Row"]["required"]) == {
        "window_start", "window_end", "source", "as_of", "complete", "late_rows"}
