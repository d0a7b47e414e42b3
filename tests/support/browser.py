"""Debian's Chromium, driven by Playwright, with the network it may reach fenced: what the
browser tests open pages in (``make test`` installs chromium)."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from playwright.sync_api import Page, Route

    from lambdalake.operations.platform import Platform

CHROMIUM = "/usr/bin/chromium"
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-artifacts"
"""Where browser tests save what they saw (git ignores it; docs/images holds copies)."""


def is_loopback(address: str) -> bool:
    """An IPv4 or IPv6 loopback address (an IPv4-mapped one too)."""
    ip = ipaddress.ip_address(address)
    mapped = getattr(ip, "ipv4_mapped", None)
    return (mapped or ip).is_loopback


def is_loopback_url(url: str) -> bool:
    """A URL the browser resolves without the network (loopback host, or data:/blob:/about:)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https", "ws", "wss"):
        return True
    return parts.hostname == "localhost" or is_loopback(parts.hostname or "0.0.0.0")


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


def log_in(page: Page, platform: Platform) -> None:
    """Log ``page`` in through Airflow's login form, as the admin."""
    page.goto(f"{platform.settings.airflow.base_url}/auth/login")
    page.fill("input[name=username]", platform.settings.airflow.admin_user)
    page.fill("input[name=password]", platform.airflow.admin_password)
    page.click("button:has-text('Sign in')")
    page.wait_for_url(lambda url: "/auth/login" not in url, timeout=30_000)
