"""GX Data Docs pages: rendered from each gate's validation, with every asset local."""

from __future__ import annotations

import logging
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from fastapi import Header
from fastapi.testclient import TestClient

from lambdalake.quality.docs import CDN_ASSETS, docs_dir, offline_html, record_with_pages
from lambdalake.quality.history import read_results, record
from lambdalake.quality.page import create_quality_app
from lambdalake.quality.verdict import GateResult
from lambdalake.settings import Settings
from tests.support.settings_factory import MakeSettings

HOUR = datetime(2026, 11, 20, 10, tzinfo=UTC)
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
