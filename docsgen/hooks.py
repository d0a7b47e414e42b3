"""mkdocs hooks (``hooks:`` in mkdocs.yml): the changelog page is the repository's
CHANGELOG.md, its links made relative to ``docs/``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

CHANGELOG = Path(__file__).resolve().parents[1] / "CHANGELOG.md"


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    if page.file.src_uri != "changelog.md":
        return markdown
    return re.sub(r"\]\(docs/", "](", CHANGELOG.read_text())
