"""A JSON document that several processes share through a file, replaced whole.

Status files, the real-time gate's marks and the late-rows answer are written by one process
and read by others (the query API's workers, ``make status``, the next task). A reader must
see the old document or the new one, never half of one, and two writers must not share a
temporary file.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any


def replace_json(path: Path, document: object,
                 default: Callable[[Any], Any] | None = None) -> None:
    """Writes ``document`` as ``path``'s JSON at once (a temporary file of this process and
    thread, then a rename); ``default`` encodes values JSON has no type for."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        temporary.write_text(json.dumps(document, default=default, indent=1, sort_keys=True))
        temporary.replace(path)
    except BaseException:
        temporary.unlink(missing_ok=True)  # a full disk leaves no stray temporary behind
        raise
