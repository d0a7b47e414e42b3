"""The manual never lies: what it derives from code is current, the Performance page quotes
the published benchmark run, and the site lists every page and builds offline."""

import re

import yaml

from bench.publish import published_block, published_figures
from docsgen.reference import PAGES
from lambdalake.cli.docs import settings_table
from tests.support.repo import REPO

DOCS = REPO / "docs"


def test_the_settings_table_matches_the_settings_module() -> None:
    page = (DOCS / "reference" / "settings.md").read_text()
    start = page.index("<!-- settings-table")
    end = page.index("<!-- /settings-table -->")
    table = page[start:end].split("\n", 1)[1]
    assert table == settings_table(), "docs/reference/settings.md is stale: run `lambdalake docs`"


def test_the_benchmark_figures_are_those_of_the_published_run() -> None:
    page = (DOCS / "performance.md").read_text()
    assert published_figures(page) == published_block(), (
        "docs/performance.md's benchmark figures differ from docs/benchmarks: "
        "run `python -m bench.publish`")
    charts = re.findall(r"\]\((benchmarks/[^)]+\.png)\)", published_figures(page))
    assert charts
    for chart in charts:
        assert (DOCS / chart).is_file(), chart


def test_the_reference_pages_generated_from_the_code_are_current() -> None:
    for page, generate in PAGES.items():
        assert page.read_text() == generate(), (
            f"{page.relative_to(REPO)} is stale: run `python -m docsgen.reference`")


def nav_pages(entries: list) -> set[str]:
    pages: set[str] = set()
    for entry in entries:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        pages |= nav_pages(value) if isinstance(value, list) else {value}
    return pages


def test_the_site_lists_every_page_and_builds_offline() -> None:
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text())
    listed = nav_pages(config["nav"])
    unlisted = {line.strip().lstrip("/") for line in config["not_in_nav"].splitlines() if line}
    pages = {path.relative_to(DOCS).as_posix() for path in DOCS.rglob("*.md")}
    assert pages - unlisted == listed
    assert config["theme"]["font"] is False, "Google Fonts would need the network"
    assert config["strict"] is True
    makefile = (REPO / "Makefile").read_text()
    lint = makefile.split("\nlint:", 1)[1].split("\n\n", 1)[0]
    assert "$(BIN)/mkdocs build --strict --site-dir site" in lint
    assert "site/" in (REPO / ".gitignore").read_text().splitlines()


def test_the_changelog_page_is_the_changelog_with_its_links_resolved_from_docs() -> None:
    from types import SimpleNamespace

    from docsgen.hooks import on_page_markdown

    page = SimpleNamespace(file=SimpleNamespace(src_uri="changelog.md"))
    text = on_page_markdown("placeholder", page)
    assert text.startswith("# Changelog")
    targets = re.findall(r"\]\(([^)#:]+)\)", text)
    assert targets
    assert [target for target in targets if not (DOCS / target).is_file()] == []
    other = SimpleNamespace(file=SimpleNamespace(src_uri="index.md"))
    assert on_page_markdown("unchanged", other) == "unchanged"
