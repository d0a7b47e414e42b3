"""Debian's Chromium, driven by Playwright, with the network it may reach fenced: what the
browser tests open pages in (``make test`` installs chromium)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from playwright.sync_api import Page, Route

CHROMIUM = "/usr/bin/chromium"


@contextmanager
def fenced_page(allowed: Callable[[str], bool],
                **page_options: Any) -> Iterator[tuple[Page, list[str]]]:
    """A new Chromium page whose requests to a URL ``allowed`` refuses are aborted, and the
    list they are recorded in (a page that loads a CDN asset shows up there)."""
    from playwright.sync_api import sync_playwright

    refused: list[str] = []

    def fence(route: Route) -> None:
        if allowed(route.request.url):
            route.continue_()
        else:
            refused.append(route.request.url)
            route.abort()

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(**page_options)
            page.route("**/*", fence)
            yield page, refused
        finally:
            browser.close()
