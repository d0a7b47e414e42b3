"""The README is the project's front page: its commands are the ones CI runs, it stays short
and undated, and every link in it and in the manual leads to a file of the repository."""

import re
from pathlib import Path

from tests.support.repo import REPO

README = (REPO / "README.md").read_text()
MAX_LINES = 250
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def test_the_two_commands_come_first_and_ci_runs_the_test_command() -> None:
    first_block = README.split("```bash", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in first_block.strip().splitlines()]
    assert commands == ["make demo", "make test"]
    assert "make test" in (REPO / ".ci" / "run").read_text()
    makefile = (REPO / "Makefile").read_text()
    assert "\ndemo:" in makefile and "\ntest:" in makefile


def test_the_readme_is_a_front_page_not_a_notebook() -> None:
    assert len(README.splitlines()) <= MAX_LINES
    headings = re.findall(r"^## (.+)$", README, flags=re.M)
    assert not {"Measured", "Roadmap"} & set(headings), "measurements and plans live in docs/"
    assert not re.findall(r"`[0-9a-f]{7,40}`", README), "commit hashes belong in the history"
    assert not re.findall(r"\b20\d\d-\d\d-\d\d \d\d:\d\d\b", README), "dated runs belong in docs/"


def markdown_files() -> list[Path]:
    return [REPO / "README.md", REPO / "CHANGELOG.md",
            *sorted((REPO / "docs").rglob("*.md"))]


def relative_links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)  # code is not a link
    return [target for target in LINK.findall(text)
            if not re.match(r"[a-z][a-z0-9+.-]*:", target) and not target.startswith("#")]


def test_every_relative_link_resolves_to_a_file_of_the_repository() -> None:
    broken = []
    for page in markdown_files():
        for target in relative_links(page):
            path = (page.parent / target.split("#", 1)[0]).resolve()
            if not path.is_file() or not path.is_relative_to(REPO):
                broken.append(f"{page.relative_to(REPO)}: {target}")
    assert broken == []


def test_the_readme_links_into_the_manual() -> None:
    linked = {target.split("#", 1)[0] for target in relative_links(REPO / "README.md")}
    for page in ("docs/getting-started.md", "docs/concepts/lambda-architecture.md",
                 "docs/operations/configuration.md", "docs/reference/settings.md",
                 "docs/performance.md", "docs/decisions.md", "CHANGELOG.md"):
        assert page in linked, page
