"""GX Data Docs pages: rendered from each gate's validation, with every asset local."""

from __future__ import annotations

import logging
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import pandas as pd
import pytest
from fastapi import FastAPI, Header
from fastapi.testclient import TestClient

from lambdalake.quality.docs import (
    CDN_ASSETS,
    docs_dir,
    local_name,
    offline_html,
    record_with_pages,
)
from lambdalake.quality.history import read_results, record
from lambdalake.quality.page import create_quality_app, write_report
from lambdalake.quality.verdict import CRITICAL, ExpectationOutcome, GateResult
from lambdalake.settings import Settings
from tests.support.html_pages import read_page
from tests.support.settings_factory import MakeSettings

HOUR = datetime(2026, 11, 20, 10, tzinfo=UTC)
PLUGIN_ROUTE = "/lambdalake-quality"
"""Where Airflow's api-server mounts the plugin's app (``plugins/lambdalake_quality.py``)."""
LOADED = re.compile(r'(?:src|<link[^>]*href)="(https?://[^"]+)"')


def failing_validation() -> Any:
    """A real GX validation result: one expectation passes, one fails."""
    import great_expectations as gx

    context = gx.get_context(mode="ephemeral")
    batches = (context.data_sources.add_pandas("p").add_dataframe_asset("a")
               .add_batch_definition_whole_dataframe("w"))
    suite = gx.ExpectationSuite("view_product_sales", expectations=[
        gx.expectations.ExpectColumnValuesToBeBetween(column="revenue", min_value=0,
                                                      meta={"check": "range:revenue"}),
        gx.expectations.ExpectColumnValuesToNotBeNull(column="revenue",
                                                      meta={"check": "not_null:revenue"}),
    ])
    frame = pd.DataFrame({"revenue": [10.0, -5.0, 3.5]})
    return batches.get_batch(batch_parameters={"dataframe": frame}).validate(
        suite, result_format="SUMMARY")


@pytest.fixture(scope="module")
def validation() -> Any:
    return failing_validation()


def test_a_rendered_page_loads_nothing_from_the_network(validation: Any) -> None:
    from great_expectations.render.renderer import ValidationResultsPageRenderer
    from great_expectations.render.view import DefaultJinjaPageView

    online = DefaultJinjaPageView().render(ValidationResultsPageRenderer().render(validation))
    unknown = set(LOADED.findall(online)) - set(CDN_ASSETS)
    assert all("great-expectations-web-assets" in url for url in unknown)  # GX's logo
    offline = offline_html(online, "../assets")
    assert LOADED.findall(offline) == []
    assert 'src="../assets/jquery@3.7.1/dist/jquery.min.js"' in offline
    assert "integrity=" not in offline


def test_a_locally_validated_gate_s_observed_numbers_render_on_its_page(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """GX's pandas engine observes numpy numbers; its page renderer formats Python's."""
    import great_expectations as gx
    import pyarrow as pa
    from great_expectations.render.renderer import ValidationResultsPageRenderer
    from great_expectations.render.view import DefaultJinjaPageView

    from lambdalake.quality.gate import run_suite_locally

    suite = gx.ExpectationSuite("view_funnel", expectations=[
        gx.expectations.ExpectColumnMaxToBeBetween(column="_orphan_share", max_value=0.2,
                                                   meta={"check": "orphan_rate"})])
    result = run_suite_locally(pa.table({"_orphan_share": [0.25, 0.75]}), suite,
                               layer="batch", subject="funnel", start=HOUR,
                               end=HOUR.replace(hour=11))
    assert result.critical_failures[0].observed == 0.75
    with caplog.at_level(logging.ERROR, logger="great_expectations"):
        html = DefaultJinjaPageView().render(
            ValidationResultsPageRenderer().render(result.validation))
    assert [r.getMessage()[:60] for r in caplog.records] == []
    assert "0.75" in html


def test_an_asset_that_is_not_vendored_is_refused() -> None:
    with pytest.raises(ValueError, match="not vendored"):
        offline_html('<script src="https://cdn.example.com/new.js"></script>', "../assets")
    link = '<a href="https://greatexpectations.io/">GX</a>'
    assert offline_html(link, "../assets") == link  # a link is followed, never loaded


def test_each_recorded_gate_gets_its_page_served_behind_the_login(
    tmp_path: Path, make_settings: MakeSettings, validation: Any
) -> None:
    assets = tmp_path / "web-assets"
    (assets / "jquery@3.7.1" / "dist").mkdir(parents=True)
    (assets / "jquery@3.7.1" / "dist" / "jquery.min.js").write_text("/* jquery */")
    settings = make_settings(state_dir=tmp_path / "state", web_assets_dir=assets)
    result = GateResult("batch", "product_sales", HOUR, HOUR.replace(hour=11), False, [], [],
                        2, 3, validation=validation)
    record_with_pages([result], settings, run_id="manual__1")
    entry = read_results(settings)[-1]
    page = docs_dir(settings) / entry["docs"]
    assert page.is_file()
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page.read_text()))
    assert "revenue" in text and "-5.0" in text
    assert "Data asset: batch product_sales [2026-11-20 10:00, 2026-11-20 11:00) UTC" in text
    assert "Run Name manual__1" in text and "__none__" not in text
    assert "data_asset_name" not in (validation.meta.get("batch_spec") or {})  # untouched

    def require_token(authorization: str = Header("")) -> None:
        if authorization != "Bearer good":
            from fastapi import HTTPException
            raise HTTPException(401, "Not authenticated")

    app = create_quality_app(require_token, settings=lambda: settings)
    client = TestClient(app, headers={"Authorization": "Bearer good"})
    overview = client.get("/").text
    assert f'href="/docs/{entry["docs"]}"' in overview
    assert client.get(f"/docs/{entry['docs']}").status_code == 200
    assert client.get("/docs/assets/jquery@3.7.1/dist/jquery.min.js").text == "/* jquery */"
    (docs_dir(settings) / "runs" / "escape.html").symlink_to(tmp_path / "state" / "secrets")
    (tmp_path / "state" / "secrets").write_text("password")
    assert client.get("/docs/runs/escape.html").status_code == 404  # nothing outside the dirs
    assert client.get("/docs/runs/missing.html").status_code == 404
    assert TestClient(app).get(f"/docs/{entry['docs']}").status_code == 401


def test_the_history_records_without_pages_and_a_page_that_fails_loses_no_verdict(
    settings: Settings, validation: Any
) -> None:
    result = GateResult("batch", "product_sales", HOUR, HOUR.replace(hour=11), False, [], [],
                        2, 3, validation=validation)
    record(result, settings, run_id="history-only")
    unreadable = GateResult("batch", "funnel", HOUR, HOUR.replace(hour=11), True, [], [], 2, 3,
                            validation=object())
    record_with_pages([unreadable], settings, run_id="broken-page")
    history_only, broken = read_results(settings)
    assert "docs" not in history_only and not (docs_dir(settings) / "runs").exists()
    assert (broken["subject"], broken["success"], broken.get("docs")) == ("funnel", True, None)
    assert broken["docs_error"].startswith("AttributeError: ")


def test_every_link_of_a_page_lands_on_a_page_under_the_plugin_and_on_disk(
    tmp_path: Path, make_settings: MakeSettings, validation: Any
) -> None:
    """Every relative href and src of a validation's page and of its suite's page, resolved
    as a browser resolves it, is answered by the plugin's app where Airflow mounts it (an
    app with nothing else, so a link out of the plugin's routes gets a 404, as Airflow's
    would), and is a file next to the pages as ``make report`` leaves them."""
    assets = tmp_path / "web-assets"
    for spec, path in CDN_ASSETS.values():
        (assets / local_name(spec, path)).parent.mkdir(parents=True, exist_ok=True)
        (assets / local_name(spec, path)).write_text("/* vendored */")
    settings = make_settings(state_dir=tmp_path / "state", web_assets_dir=assets)
    failed = ExpectationOutcome("range:revenue", "expect_column_values_to_be_between",
                                "revenue", CRITICAL)
    record_with_pages([GateResult("batch", "product_sales", HOUR, HOUR.replace(hour=11), False,
                                  [failed], [], 2, 3, validation=validation)],
                      settings, run_id="manual__1")
    write_report(settings)
    airflow = FastAPI()
    airflow.mount(PLUGIN_ROUTE, create_quality_app(lambda: None, settings=lambda: settings))
    client = TestClient(airflow)
    run_page = f"docs/{read_results(settings)[-1]['docs']}"
    pages = [run_page, "docs/expectations/view_product_sales.html"]
    for name in pages:
        url = f"http://testserver{PLUGIN_ROUTE}/{name}"
        served = client.get(url)
        assert served.status_code == 200, name
        links = [link for link in read_page(served.text).urls if not link.startswith("#")]
        outside = {link for link in links if urlsplit(urljoin(url, link)).netloc != "testserver"}
        assert {urlsplit(link).netloc for link in outside} == {"greatexpectations.io"}  # GX's
        for link in set(links) - outside:
            answer = client.get(urljoin(url, link))
            assert answer.status_code == 200, f"{name}: {link} -> {answer.status_code}"
            assert (docs_dir(settings) / name.removeprefix("docs/")).parent.joinpath(
                link).resolve().is_file(), f"{name}: {link} is not on disk"
        home = client.get(urljoin(url, "../index.html"))
        assert str(home.url) == f"http://testserver{PLUGIN_ROUTE}/"
        assert "<h1>Data quality</h1>" in home.text
    suite_link = [link for link in read_page(client.get(f"{PLUGIN_ROUTE}/{run_page}").text).urls
                  if "expectations/" in link]
    assert suite_link == ["../expectations/view_product_sales.html"]
