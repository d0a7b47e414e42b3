"""The documentation site's own code: the reference pages generated from the code
(``reference``) and the mkdocs hooks (``hooks``). Nothing in ``lambdalake`` imports it."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
"""The checkout whose docs/ these pages belong to."""
