"""A gate's Data Docs page says the platform's verdict: its status, statistics and rows,
with GX's observed values, and the gate's derived columns apart from the table's."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import great_expectations as gx
import pyarrow as pa
import pytest

from lambdalake.quality.gate import run_suite_locally
from lambdalake.quality.history import entry
from lambdalake.quality.rendering import suite_page, validation_page
from lambdalake.quality.suites.common import CRITICAL, WARNING, expect_on, new_suite
from lambdalake.quality.verdict import GateResult
from tests.support.html_pages import Page, read_page

HOUR = datetime(2026, 11, 20, 10, tzinfo=UTC)
WARNED = "warning: recorded, does not block"


def suite() -> gx.ExpectationSuite:
    """A view-like suite: table-level, column and derived checks of both severities."""
    return new_suite("view_page_traffic", [
        expect_on(gx.expectations.ExpectTableRowCountToBeBetween, "not_empty",
                  "the slice has rows", WARNING, min_value=1),
        expect_on(gx.expectations.ExpectTableColumnsToMatchSet, "columns", "its columns",
                  CRITICAL, column_set=["page", "views"], exact_match=False),
        expect_on(gx.expectations.ExpectColumnValuesToNotBeNull, "not_null:page",
                  "every row has its page", WARNING, column="page"),
        expect_on(gx.expectations.ExpectColumnValuesToBeBetween, "range:views",
                  "views are not negative", CRITICAL, column="views", min_value=0),
        expect_on(gx.expectations.ExpectColumnValuesToBeNull, "window", "windows are aligned",
                  CRITICAL, about="window_start,window_end", column="_window"),
        expect_on(gx.expectations.ExpectColumnMaxToBeBetween, "orphan_rate", "few orphans",
                  WARNING, about="product_id", column="_orphan_share", max_value=0.5),
    ], {"_window": "CASE WHEN views > 100 THEN 'a wrong window' END",
        "_orphan_share": "0.25"})


def gated(views: list[int]) -> GateResult:
    """The gate's verdict on three rows, one without its page (a warning)."""
    rows = pa.table({"page": ["home", "cart", None], "views": views})
    return run_suite_locally(rows, suite(), layer="batch", subject="page_traffic",
                             start=HOUR, end=HOUR.replace(hour=11))


def page_of(result: GateResult) -> tuple[str, Page]:
    recorded = entry(result, run_id="manual__1")
    html = validation_page(result.validation, recorded, asset="batch page_traffic",
                           run_name="manual__1", run_time=recorded["recorded_at"])
    return html, read_page(html)


@pytest.fixture(scope="module")
def warned() -> tuple[str, Page]:
    return page_of(gated([3, 2, 1]))


def test_a_gate_that_passed_with_a_warning_says_so_where_gx_said_failed(
    warned: tuple[str, Page],
) -> None:
    html, page = warned
    overview = page.section("Overview")
    assert "Status: passed, 1 warning" in overview.words()
    assert "Failed" not in overview.words() and "Succeeded" not in overview.words()
    assert re.search(r'Status:</span>\s*<i class="fas fa-exclamation-triangle text-warning"',
                     html)
    assert [row for row in overview.rows if len(row) == 2][:5] == [
        ["Evaluated Expectations", "6"], ["Passed", "5"],
        ["Critical failures (fail the gate)", "0"], ["Warnings (recorded, do not block)", "1"],
        ["Verdict", "passed, 1 warning"]]


def test_each_row_says_what_it_did_to_the_gate_with_its_observed_value(
    warned: tuple[str, Page],
) -> None:
    _, page = warned
    (header, row), icons = page.section("page").rows, page.section("page").icons[1]
    assert header == [] and row[-1] == WARNED  # the header row has th cells only
    assert "33.33% of 3 total rows" in row[1]
    assert icons == ["fas fa-exclamation-triangle text-warning"]  # not GX's red cross
    _, count, columns = page.section("Table-Level Expectations").rows
    assert count[2:] == ["3", "passed"]  # the row count, observed (after icon, expectation)
    assert columns[2:] == ["['page', 'views']", "passed"]  # not the gate's _window
    (_, views), = [page.section("views").rows]
    assert views[2:] == ["0% unexpected", "passed"]


def test_derived_columns_are_checks_of_their_own_not_columns_of_the_table(
    warned: tuple[str, Page],
) -> None:
    _, page = warned
    assert page.toc == ["Overview", "Table-Level Expectations", "page", "views",
                        "Derived checks"]
    derived = page.section("Derived checks").words()
    assert "_window (derived, checks window_start, window_end)" in derived
    assert "_orphan_share (derived, checks product_id)" in derived
    assert "100% null" in derived and "0.25" in derived  # their observed values
    suite_toc = read_page(suite_page(gated([3, 2, 1]).validation)).toc
    assert suite_toc == ["Overview", "page", "views", "Derived checks"]


def test_a_failed_gate_marks_its_critical_failure() -> None:
    html, page = page_of(gated([3, 2, -1]))
    assert "Status: FAILED: range:views" in page.section("Overview").words()
    assert re.search(r'Status:</span>\s*<i class="fas fa-times text-danger"', html)
    (_, views), = [page.section("views").rows]
    assert views[-1] == "critical: fails the gate"
    assert page.section("views").icons[1] == ["fas fa-times text-danger"]
    assert page.section("page").rows[1][-1] == WARNED


def test_a_page_gx_renders_otherwise_is_refused_not_shown_with_gx_s_verdict(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from great_expectations.render.renderer import ValidationResultsPageRenderer

    def statistics_elsewhere(validation_results: Any) -> Any:
        from great_expectations.render import TextContent

        return TextContent(text=["60% successful"])

    monkeypatch.setattr(ValidationResultsPageRenderer, "_render_validation_statistics",
                        staticmethod(statistics_elsewhere))
    with pytest.raises(ValueError, match="no statistics table"):
        page_of(gated([3, 2, 1]))
