"""Contract folders for evolution tests: the repository's contracts plus a page_view v2."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from lambdalake.contracts.registry import ContractRegistry, events_dir


def contracts_with_page_view_v2(directory: Path, referrer_required: bool = False
                                ) -> ContractRegistry:
    """The repository's contracts copied to ``directory`` plus a page_view v2 that adds
    ``referrer``: optional (a compatible change), or required (an incompatible one)."""
    if not directory.exists():
        shutil.copytree(events_dir(), directory)
        document = json.loads((directory / "page_view.v1.json").read_text())
        document["$id"] = "page_view.v2.json"
        document["properties"]["schema_version"] = {"const": 2}
        document["properties"]["referrer"] = {"type": "string", "maxLength": 256,
                                              "description": "The page the user came from."}
        if referrer_required:
            document["required"] = [*document.get("required", []), "referrer"]
        (directory / "page_view.v2.json").write_text(json.dumps(document))
    return ContractRegistry(directory)
