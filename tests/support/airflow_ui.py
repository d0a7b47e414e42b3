"""Airflow's UI, driven as a person would: the Trigger dialog's single run with the form's
defaults, its Backfill pane (what an operator does in place of the REST calls and CLI
commands other tests use), and the Pipeline status page of the lambdalake plugin."""

from __future__ import annotations

from datetime import date
from typing import TYPE_CHECKING
from urllib.parse import unquote

from tests.support.browser import SCREENSHOTS

if TYPE_CHECKING:
    from playwright.sync_api import Locator, Page

    from lambdalake.operations.platform import Platform

REPROCESS_BEHAVIOURS = ("Missing Runs", "Missing and Errored Runs", "All Runs")


def open_trigger_dialog(page: Page, platform: Platform, dag_id: str) -> Locator:
    """The DAG page's Trigger dialog, open."""
    page.goto(f"{platform.settings.airflow.base_url}/dags/{dag_id}")
    page.get_by_role("button", name="Trigger").first.click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_text("Trigger a single run of this Dag").wait_for()
    return dialog


def trigger_with_the_forms_defaults(page: Page, platform: Platform, dag_id: str,
                                    screenshot: str | None = None) -> str:
    """Press the dialog's Trigger button without touching the form; return the run id of the
    run page Airflow then opens. ``screenshot``: the form's file name in SCREENSHOTS."""
    dialog = open_trigger_dialog(page, platform, dag_id)
    dialog.get_by_text("Inferred from Logical Date and Timetable").wait_for()
    if screenshot:
        save(page, screenshot)
    dialog.get_by_role("button", name="Trigger").click()
    page.wait_for_url(f"**/dags/{dag_id}/runs/**", timeout=30_000)
    page.get_by_text("Dag Run Triggered").first.wait_for()
    return unquote(page.url.split("/runs/", 1)[1].split("?", 1)[0].rstrip("/"))


def backfill_from_the_dialog(page: Page, platform: Platform, dag_id: str, first: date,
                             last: date, reprocess: str, max_active_runs: int, runs: int,
                             screenshot: str | None = None) -> None:
    """Fill in the Backfill pane (logical dates ``first`` to ``last`` at midnight UTC, a
    reprocess behaviour of REPROCESS_BEHAVIOURS, runs at a time), wait until the pane says
    it will trigger ``runs`` runs, and run it."""
    from playwright.sync_api import expect

    if reprocess not in REPROCESS_BEHAVIOURS:
        raise ValueError(f"reprocess {reprocess!r} is none of {REPROCESS_BEHAVIOURS}")
    dialog = open_trigger_dialog(page, platform, dag_id)
    dialog.get_by_text("Run this Dag for a range of dates").click()
    pickers = dialog.get_by_test_id("datetime-input")
    expect(pickers).to_have_count(2)  # From and To: the pane replaced the single run's form
    calendar = page.locator("[data-scope=popover][data-part=content]:visible")
    for picker, day in zip(pickers.all(), (first, last), strict=True):
        picker.click()
        calendar.get_by_placeholder("YYYY/MM/DD").fill(f"{day:%Y/%m/%d}")
        calendar.get_by_placeholder("HH:mm").fill("00:00")
        dialog.get_by_text("Date Range", exact=True).click()  # closes the calendar
        expect(calendar).to_have_count(0)
    dialog.get_by_text(reprocess, exact=True).click()
    dialog.locator("input[name=max_active_runs]").fill(str(max_active_runs))
    expect(dialog.get_by_text(f"{runs} runs will be triggered.", exact=True)).to_be_visible()
    if screenshot:
        save(page, screenshot)
    dialog.get_by_role("button", name="Run Backfill").click()
    page.get_by_text("Backfill generated").first.wait_for(timeout=30_000)


def save(page: Page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / name), full_page=True)


def pipeline_status(page: Page, platform: Platform, screenshot: str | None = None
                    ) -> tuple[dict[str, list[str]], dict[str, int]]:
    """The Pipeline status page, opened from its nav entry (it renders in an iframe): each
    view's cells by view name (``status_page.views_table``'s columns), and how many lines
    each chart draws, by its title."""
    page.goto(f"{platform.settings.airflow.base_url}/plugin/pipeline-status")
    frame = page.frame_locator("iframe").first
    frame.get_by_text("Over time").wait_for(timeout=60_000)
    rows = {cells[0]: cells for cells in (
        [cell.inner_text() for cell in row.locator("td").all()]
        for row in frame.locator("table tbody tr").all())}
    charts = {heading.inner_text(): heading.evaluate(
        "h => h.nextElementSibling.querySelectorAll('polyline').length")
        for heading in frame.locator("h3").all()}
    if screenshot:
        save(page, screenshot)
    return rows, charts
