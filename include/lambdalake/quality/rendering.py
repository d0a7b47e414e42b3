"""A gate's Data Docs pages, saying what the platform's verdict says.

GX renders a validation as a page whose status is GX's own ``success``: any failed
expectation fails it, so a gate that passed with a warning read "Failed" there. These
pages are GX's renderers (``ValidationResultsPageRenderer``,
``ExpectationSuitePageRenderer``, ``DefaultJinjaPageView``) with their document adjusted
before it becomes HTML:

- the status is the verdict as every report words it (``report.verdict``: ``passed``,
  ``passed, 1 warning``, ``FAILED: check, ...``) and the statistics count critical
  failures and warnings apart;
- each expectation's row says, in a *Verdict* column, whether it passed, failed
  critically or only warned, from the recorded outcomes, and a warning's icon is GX's
  warning triangle, not its red cross (GX's own way to add a column,
  ``meta_properties_to_render``, makes GX 1.24's renderer raise: the kwarg is not a field
  of the expectation);
- the sections of derived columns (``_window``, ``_orphan_share``: columns the gate adds
  to the slice, ``suites.common.is_derived``) are one *Derived checks* section, each named
  with the columns it checks, not listed as columns of the table (nor among the columns a
  table-columns check observed);
- the links fit the pages' layout under the docs dir (``runs/<page>.html``,
  ``expectations/<suite>.html``, ``index.html``), where GX assumes its own site's deeper
  one: *Home* is ``../index.html`` and the suite link ``../expectations/<suite>.html``.

The document is GX's public render types (sections, headers, tables); a part this module
expects and does not find raises ``ValueError``, so a GX upgrade that changes it fails the
page loudly (the verdict is recorded either way) instead of showing GX's verdict again.
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Mapping
from html import escape
from typing import Any

from lambdalake.quality.gate import result_check
from lambdalake.quality.report import status, verdict
from lambdalake.quality.suites.common import is_derived

EXPECTATIONS_DIR = "expectations"
DERIVED_SECTION = "Derived checks"
VERDICT_COLUMN = "Verdict"
TABLE_LEVEL = "Table-Level Expectations"
"""GX's section of the expectations on no column (GX's name for it)."""
_ICONS = {"passed": "fa-check-circle text-success",
          "warning": "fa-exclamation-triangle text-warning",
          "failed": "fa-times text-danger"}
_COLUMNS_CHECKS = {"expect_table_columns_to_match_set",
                   "expect_table_columns_to_match_ordered_list"}
_FAVICON = re.compile(r'<link rel="shortcut icon" href="[^"]*"[^>]*>')


@functools.cache
def jinja_page_view() -> Any:
    """GX's page view, one per process: each instance has its own Jinja environment, which
    compiles GX's 17 templates again for its first page (five pages: 0.26-0.43 CPU-s with a
    view each, 0.08-0.10 with one)."""
    from great_expectations.render.view import DefaultJinjaPageView

    return DefaultJinjaPageView()


def suite_page_path(suite: str) -> str:
    """Where a suite's page lives, relative to the docs dir."""
    return f"{EXPECTATIONS_DIR}/{suite}.html"


def row_verdicts(entry: dict[str, Any]) -> dict[str, str]:
    """Per failed check, what it did to the gate (the recorded outcomes, not GX's
    ``success``: an expectation that raised fails the gate whatever its severity)."""
    marks = {o["check"]: "warning: recorded, does not block" for o in entry["warnings"]}
    for outcome in entry["critical_failures"]:
        marks[outcome["check"]] = ("critical: did not evaluate" if outcome.get("error")
                                   else "critical: fails the gate")
    return marks


def validation_page(validation: Any, entry: dict[str, Any], *, asset: str,
                    run_name: str, run_time: str) -> str:
    """The HTML of a validation's page (``entry``: its recorded result, whose verdict the
    page shows). ``asset``, ``run_name`` and ``run_time`` head it: an in-memory DataFrame
    batch has no asset name or run of its own, so GX would show "None"."""
    from great_expectations.render.renderer import ValidationResultsPageRenderer

    page = copy.deepcopy(validation)
    page.meta = {**validation.meta,
                 "batch_spec": {**(validation.meta.get("batch_spec") or {}),
                                "data_asset_name": asset},
                 "run_id": {"run_name": run_name, "run_time": run_time}}
    for result in page.results:
        _table_columns_only(result)
    marks = row_verdicts(entry)
    document = ValidationResultsPageRenderer().render(page)
    _mark_rows(document, page.results, marks)
    overview = _section(document, "Overview")
    _show_verdict(overview, entry, suite_link=f"../{suite_page_path(page.suite_name)}")
    _count_by_verdict(overview, entry, passed=sum(
        result_check(r) not in marks for r in page.results))
    _derived_apart(document, _derived_about(r.expectation_config for r in page.results))
    html = jinja_page_view().render(document)
    return _site_links(html, gx_depth=page.suite_name.count(".") + 4)


def suite_page(validation: Any) -> str:
    """The HTML of the suite a validation ran (its expectations as validated, with the
    suite parameters of that slice), for the validation page's suite link."""
    import great_expectations as gx
    from great_expectations.render.renderer import ExpectationSuitePageRenderer

    configs = [copy.deepcopy(r.expectation_config) for r in validation.results]
    suite = gx.ExpectationSuite(name=validation.suite_name, expectations=configs)
    document = ExpectationSuitePageRenderer().render(suite)  # type: ignore[no-untyped-call]
    _derived_apart(document, _derived_about(configs))
    html = jinja_page_view().render(document)
    return _site_links(html, gx_depth=validation.suite_name.count(".") + 1)


def _table_columns_only(result: Any) -> None:
    """A table-columns check's observed columns without the derived ones (the gate added
    them to the slice it validated; they are not the table's)."""
    observed = (result.result or {}).get("observed_value")
    if result.expectation_config.type in _COLUMNS_CHECKS and isinstance(observed, list):
        result.result["observed_value"] = [c for c in observed if not is_derived(str(c))]


def _section(document: Any, name: str) -> Any:
    for section in document.sections:
        if section.section_name == name:
            return section
    raise ValueError(f"GX's page has no {name!r} section")


def _show_verdict(overview: Any, entry: dict[str, Any], suite_link: str) -> None:
    """The overview's status: the verdict, with its icon; the suite linked where it is."""
    from great_expectations.render import RenderedHeaderContent

    header = next((b for b in overview.content_blocks if isinstance(b, RenderedHeaderContent)),
                  None)
    template = getattr(getattr(header, "subheader", None), "string_template", None) or {}
    params = template.get("params") or {}
    link = ((template.get("styling") or {}).get("params") or {}).get(
        "expectation_suite_name", {}).get("attributes")
    if not {"success", "html_success_icon"} <= set(params) or link is None:
        raise ValueError("GX's validation header has no status or suite link to replace")
    params["success"] = verdict(entry)
    params["html_success_icon"] = (f'<i class="fas {_ICONS[status(entry)]}" '
                                   'aria-hidden="true"></i>')
    link["href"] = suite_link


def _count_by_verdict(overview: Any, entry: dict[str, Any], passed: int) -> None:
    """The overview's statistics, counted as the verdict counts: critical failures and
    warnings apart (GX counts both as unsuccessful)."""
    table = next((b for b in overview.content_blocks if getattr(b, "content_block_type", "")
                  == "table" and _header_text(b) == "Statistics"), None)
    if table is None:
        raise ValueError("GX's validation overview has no statistics table")
    table.table = [["Evaluated Expectations", entry["evaluated"]],
                   ["Passed", passed],
                   ["Critical failures (fail the gate)", len(entry["critical_failures"])],
                   ["Warnings (recorded, do not block)", len(entry["warnings"])],
                   ["Verdict", verdict(entry)]]


def _mark_rows(document: Any, results: list[Any], marks: Mapping[str, str]) -> None:
    """A *Verdict* cell on each expectation's row: GX renders a column's section as one
    table row per result of that column, in the order of the results."""
    for section in document.sections:
        if section.section_name == "Overview":
            continue
        ours = [r for r in results
                if r.expectation_config.kwargs.get("column", TABLE_LEVEL) == section.section_name]
        table = next((b for b in section.content_blocks
                      if getattr(b, "content_block_type", "") == "table"), None)
        if table is None or len(table.table) != len(ours):
            raise ValueError(f"GX's section {section.section_name!r} is not a row per result")
        table.header_row = [*table.header_row, VERDICT_COLUMN]
        for row, result in zip(table.table, ours, strict=True):
            mark = marks.get(result_check(result), "passed")
            if mark.startswith("warning"):
                _warning_icon(row[0])
            row.append(mark)


def _warning_icon(cell: Any) -> None:
    """A warning's status icon: GX's warning triangle, not its red cross of a failure."""
    try:
        icon = cell.string_template["styling"]["params"]["icon"]
    except (AttributeError, KeyError, TypeError) as missing:
        raise ValueError("GX's status cell has no icon to replace") from missing
    icon["classes"] = ["fas", "fa-exclamation-triangle", "text-warning"]
    cell.string_template["params"]["markdown_status_icon"] = "⚠️"


def _header_text(block: Any) -> str:
    header = getattr(block, "header", None)
    return str((getattr(header, "string_template", None) or {}).get("template", header))


def _derived_about(configs: Any) -> dict[str, str]:
    """Per derived column, the columns its checks are about (``meta['column']``)."""
    about: dict[str, str] = {}
    for config in configs:
        column = config.kwargs.get("column")
        if column and is_derived(column):
            about[column] = str((config.meta or {}).get("column") or "")
    return about


def _derived_apart(document: Any, about: Mapping[str, str]) -> None:
    """The sections of derived columns as one last section, each headed by its column and
    what it checks: they are the gate's, not columns of the table."""
    from great_expectations.render import (
        RenderedHeaderContent,
        RenderedSectionContent,
        RenderedStringTemplateContent,
    )

    derived = [s for s in document.sections if is_derived(s.section_name)]
    if not derived:
        return
    blocks: list[Any] = [RenderedHeaderContent(
        header=RenderedStringTemplateContent(
            content_block_type="string_template",
            string_template={"template": DERIVED_SECTION, "tag": "h5",
                             "styling": {"classes": ["m-0"]}}),
        subheader=RenderedStringTemplateContent(
            content_block_type="string_template",
            string_template={"template": "Columns the gate computes from the slice to check "
                             "it; they are not columns of the table.", "tag": "p"}),
        styling={"classes": ["col-12", "p-0"],
                 "header": {"classes": ["alert", "alert-secondary"]}})]
    for section in derived:
        head, *rest = section.content_blocks
        template = getattr(head.header, "string_template", None)
        if template is None:
            raise ValueError(f"GX's section {section.section_name!r} has no header to name")
        checks = about.get(section.section_name)
        template["template"] = escape(section.section_name + (
            f" (derived, checks {checks.replace(',', ', ')})" if checks else " (derived)"))
        template["tag"] = "h6"
        blocks += [head, *rest]
    document.sections = [*(s for s in document.sections if s not in derived),
                         RenderedSectionContent(section_name=DERIVED_SECTION,
                                                content_blocks=blocks)]


def _site_links(html: str, gx_depth: int) -> str:
    """``html`` with GX's links up to its site's index (``gx_depth`` levels up, where GX
    puts a page) one level up, where the docs dir's index is, and without the favicon GX's
    site would have (none here)."""
    home = f'href="{"../" * gx_depth}index.html"'
    if home not in html:
        raise ValueError(f"GX's page has no {home} link to its site's index")
    return _FAVICON.sub("", html.replace(home, 'href="../index.html"'))
