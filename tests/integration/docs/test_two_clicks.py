"""The documentation site as a new user meets it: built as `make lint` builds it, served on
loopback and opened in Chromium with the network fenced. From the home page, one click
each (the "Find it fast" table) lands on the answer to what a newcomer asks first."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.support.browser import fenced_page
from tests.support.repo import REPO

QUESTIONS = [
    # what the user asks (the row of the home page's table), where they land, what they read
    ("add a view", "Add a view", "Write the definition"),
    ("backfill, recompute or restate", "Backfill and restate", "backfill create"),
    ('know what "late" means here', "Event time and lateness", "Where a late event ends up"),
    ("run on a Spark cluster", "Run on a cluster", "spark"),
    ("find the Data quality page", "Data quality", "Browse"),
    ("know what each setting does", "Settings", "LAMBDALAKE_BATCH__INTERVAL"),
    ("see every view's state", "Pipeline status", "Over time"),
]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The site built from this checkout (strict, as CI's lint builds it), served on
    loopback; its base URL."""
    built = tmp_path_factory.mktemp("site")
    subprocess.run([str(Path(sys.executable).parent / "mkdocs"), "build", "--strict", "-q",
                    "--site-dir", str(built)], cwd=REPO, check=True, timeout=300,
                   env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})  # as the Makefile does
    handler = functools.partial(QuietHandler, directory=str(built))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()


class QuietHandler(SimpleHTTPRequestHandler):
    """Files of the site, without a log line per request in the test's output."""

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_each_first_question_is_one_click_from_the_home_page(site: str) -> None:
    landed = {}
    with fenced_page(lambda url: url.startswith(site) or not url.startswith("http"),
                     viewport={"width": 1280, "height": 900}) as (page, refused):
        for question, title, phrase in QUESTIONS:
            page.goto(site)
            page.locator("table tr", has_text=question).locator("a").first.click()
            page.wait_for_load_state()
            heading = page.locator("article h1").first.inner_text().rstrip("¶")
            text = page.locator("article").inner_text()
            landed[question] = (page.url.removeprefix(site), heading)
            assert heading == title, (question, landed[question])
            assert phrase in text, (question, phrase, landed[question])
    assert refused == [], f"the site asked beyond loopback: {refused}"
    print("one click from the home page: " + "; ".join(
        f"{question} -> {url}" for question, (url, _) in landed.items()))
