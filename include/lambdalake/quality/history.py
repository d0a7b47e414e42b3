"""Gate results, one JSON line each, in ``<state dir>/quality/results.jsonl``.

A placeholder for the quality history table (issue #7): append-only, one line per gate
run, readable with ``jq`` or pandas. Appends of whole lines are atomic enough for the
few concurrent writers a local stack has.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lambdalake.settings import Settings

if TYPE_CHECKING:
    from lambdalake.quality.gate import GateResult


def results_path(settings: Settings) -> Path:
    return settings.state_dir / "quality" / "results.jsonl"


def record(result: GateResult, settings: Settings, **context: Any) -> Path:
    """Append ``result`` (and ``context``, e.g. a run id) as one JSON line, after writing
    its Data Docs page (``docs``: the page, relative to the docs dir). A page that cannot
    be written is noted (``docs_error``); the verdict is recorded either way."""
    from lambdalake.quality.docs import RUNS_DIR, page_name, write_page

    path = results_path(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    entry = {**result.to_json(), **context, "recorded_at": datetime.now(UTC).isoformat()}
    if result.validation is not None:
        try:
            name = page_name(entry)
            write_page(settings, result.validation, name)
            entry["docs"] = f"{RUNS_DIR}/{name}"
        except Exception as error:
            entry["docs_error"] = f"{type(error).__name__}: {error}"
    line = json.dumps(entry, default=str, separators=(",", ":"))
    with path.open("a", encoding="utf-8") as file:
        file.write(line + "\n")
    return path


def read_results(settings: Settings) -> list[dict[str, Any]]:
    """Every recorded result, oldest first (none if nothing was recorded)."""
    path = results_path(settings)
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
