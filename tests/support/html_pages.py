"""Read a written HTML page as a reader sees it: its sections with their text and table
rows, and every URL it links or loads (the standard library's parser, no browser)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

_SECTION_ID = re.compile(r"section-\d+")
_URL_ATTRIBUTES = {"href", "src"}


@dataclass
class Section:
    """One ``ge-section`` of a GX page: its words and its table rows (cells' text, and the
    icons' classes of each row)."""

    text: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)
    icons: list[list[str]] = field(default_factory=list)

    @property
    def title(self) -> str:
        return self.text[0] if self.text else ""

    def words(self) -> str:
        return " ".join(self.text)


class _Reader(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.sections: list[Section] = []
        self.urls: list[str] = []
        self.toc: list[str] = []
        self._skip = 0
        self._tables = 0  # a nested table (GX's sampled unexpected values) is in its cell
        self._cell: list[str] | None = None
        self._in_toc_link = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        self.urls += [value for name, value in values.items() if name in _URL_ATTRIBUTES]
        if tag in ("script", "style"):
            self._skip += 1
        elif tag == "div" and _SECTION_ID.fullmatch(values.get("id", "")):
            self.sections.append(Section())
        elif tag == "a" and "ge-navigation-sidebar-link" in values.get("class", ""):
            self._in_toc_link = True
            self.toc.append("")
        elif tag == "table":
            self._tables += 1
        elif not self.sections or self._tables > 1:
            return
        elif tag == "tr":
            self.sections[-1].rows.append([])
            self.sections[-1].icons.append([])
        elif tag == "td":
            self._cell = []
        elif tag == "i" and self.sections[-1].icons:
            self.sections[-1].icons[-1].append(values.get("class", ""))

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style"):
            self._skip -= 1
        elif tag == "a":
            self._in_toc_link = False
        elif tag == "table":
            self._tables -= 1
        elif tag == "td" and self._tables == 1 and self._cell is not None and self.sections[-1].rows:
            self.sections[-1].rows[-1].append(" ".join(self._cell))
            self._cell = None

    def handle_data(self, data: str) -> None:
        words = " ".join(data.split())
        if self._skip or not words:
            return
        if self._in_toc_link:
            self.toc[-1] = f"{self.toc[-1]} {words}".strip()
        if self.sections:
            self.sections[-1].text.append(words)
        if self._cell is not None:
            self._cell.append(words)


@dataclass(frozen=True)
class Page:
    sections: list[Section]
    urls: list[str]
    """Every ``href`` and ``src``, in the order of the page."""
    toc: list[str]
    """The entries of GX's table of contents."""

    def section(self, title: str) -> Section:
        found = [s for s in self.sections if s.title == title]
        assert len(found) == 1, f"{len(found)} sections {title!r} in {[s.title for s in self.sections]}"
        return found[0]


def read_page(html: str) -> Page:
    reader = _Reader()
    reader.feed(html)
    reader.close()
    return Page(reader.sections, reader.urls, reader.toc)
