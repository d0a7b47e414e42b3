"""Airflow's own UI, driven as a person would: the Trigger dialog's single run with the
form's defaults, and its Backfill pane (what an operator does in place of the REST calls
and CLI commands other tests use)."""

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
                             last: date, reprocess: str, max_active_runs: int,
                             screenshot: str | None = None) -> str:
    """Fill in the Backfill pane (logical dates ``first`` to ``last`` at midnight UTC, a
    reprocess behaviour of REPROCESS_BEHAVIOURS, runs at a time) and run it; return the
    pane's own count line ("3 runs will be triggered.") as it read before the click."""
    if reprocess not in REPROCESS_BEHAVIOURS:
        raise ValueError(f"reprocess {reprocess!r} is none of {REPROCESS_BEHAVIOURS}")
    dialog = open_trigger_dialog(page, platform, dag_id)
    dialog.get_by_text("Run this Dag for a range of dates").click()
    for picker, day in zip(dialog.get_by_test_id("datetime-input").all(), (first, last),
                           strict=True):
        picker.click()
        calendar = page.locator("[data-scope=popover][data-part=content]:visible")
        calendar.get_by_placeholder("YYYY/MM/DD").fill(f"{day:%Y/%m/%d}")
        calendar.get_by_placeholder("HH:mm").fill("00:00")
        dialog.get_by_text("Date Range", exact=True).click()  # closes the calendar
    dialog.get_by_text(reprocess, exact=True).click()
    dialog.locator("input[name=max_active_runs]").fill(str(max_active_runs))
    count = dialog.get_by_text("will be triggered")
    count.wait_for()
    counted = count.inner_text()
    if screenshot:
        save(page, screenshot)
    dialog.get_by_role("button", name="Run Backfill").click()
    page.get_by_text("Backfill generated").first.wait_for(timeout=30_000)
    return counted


def save(page: Page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / name), full_page=True)
