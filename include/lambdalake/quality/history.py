"""The quality history: one row per gate run, in the Delta table ``quality_results``.

A bookkeeping table beside the data (written with delta-rs, no JVM): every gate of every
layer appends its verdict, whatever process it runs in (a Spark child of the batch DAG, the
speed supervisor, the serving DAG); concurrent writers make blind appends, which Delta
commits without conflict. The flat columns — layer, subject, suite, interval, success, how
many critical failures and warnings, expectations evaluated, rows, seconds, run id, time,
Data Docs page — answer SQL directly, e.g. with delta-rs and DuckDB::

    results = DeltaTable(".state/lake/quality_results").to_pyarrow_dataset()
    duckdb.sql("SELECT layer, subject, count(*) FILTER (NOT success) FROM results GROUP BY ALL")

``entry`` holds the whole record as JSON (failing expectations with their rule, observed
value and samples, plus the caller's context), which is what ``read_results`` returns. The
table's small files (one per gate step) are compacted as it grows (``append_rows``). This
module records and reads; a gate's Data Docs pages are written beside it by
``lambdalake.quality.docs.record_with_pages``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lambdalake.settings import Settings

if TYPE_CHECKING:
    from lambdalake.quality.verdict import GateResult

RESULTS_TABLE = "quality_results"
_TIME = pa.timestamp("us", tz="UTC")
SCHEMA = pa.schema([
    ("layer", pa.string()), ("subject", pa.string()), ("suite", pa.string()),
    ("interval_start", _TIME), ("interval_end", _TIME), ("success", pa.bool_()),
    ("critical_failures", pa.int32()), ("warnings", pa.int32()), ("evaluated", pa.int32()),
    ("rows", pa.int64()), ("seconds", pa.float64()), ("run_id", pa.string()),
    ("recorded_at", _TIME), ("docs", pa.string()), ("entry", pa.string()),
])


def results_path(settings: Settings) -> str:
    return settings.table_path(RESULTS_TABLE)


def entry(result: GateResult, **context: Any) -> dict[str, Any]:
    """What the history keeps of ``result``: its verdict with the caller's ``context`` (e.g.
    a run id) and the time it was recorded."""
    return {**result.to_json(), **context, "recorded_at": datetime.now(UTC).isoformat(),
            "suite": getattr(result.validation, "suite_name", None)}


def record(result: GateResult, settings: Settings, **context: Any) -> str:
    """Append ``result`` (and ``context``) to the history; return the table's path."""
    return append(settings, [entry(result, **context)])


MOMENT_FIELDS = ("recorded_at", "seconds", "docs", "docs_error")
"""What differs between two records of one verdict: when, how long, and its page's name."""


def append(settings: Settings, entries: Sequence[dict[str, Any]]) -> str:
    """Append ``entries`` (made by ``entry``) in one commit: a gate step's gates make one
    file and one log entry instead of one each. Entries of a run (each has a ``run_id``)
    are appended once: a task retried after a commit whose answer was lost records the
    same verdicts again, which the history then holds once."""
    from lambdalake.lake.delta_rs import append_rows, content_key

    path = results_path(settings)
    once = None
    if entries and all(kept.get("run_id") for kept in entries):
        once = content_key("quality", [{k: v for k, v in kept.items() if k not in MOMENT_FIELDS}
                                       for kept in entries])
    append_rows(path, SCHEMA, [_row(kept) for kept in entries], once=once)
    return path


def read_results(settings: Settings) -> list[dict[str, Any]]:
    """Every recorded result, oldest first (none if nothing was recorded)."""
    from lambdalake.lake.delta_rs import read_rows  # delta-rs: not when a page imports this

    rows = read_rows(results_path(settings), pa.schema([SCHEMA.field("recorded_at"),
                                                        SCHEMA.field("entry")]))
    rows.sort(key=lambda row: row["recorded_at"])
    return [json.loads(row["entry"]) for row in rows]


def read_verdicts(settings: Settings) -> list[dict[str, Any]]:
    """Every recorded verdict's flat columns (layer, subject, success, warnings, seconds),
    oldest first: what the metrics count, without the entries' failures and samples."""
    from lambdalake.lake.delta_rs import read_rows

    columns = ("layer", "subject", "success", "warnings", "seconds", "recorded_at")
    rows = read_rows(results_path(settings), pa.schema([SCHEMA.field(c) for c in columns]))
    rows.sort(key=lambda row: row["recorded_at"])
    return rows


def read_row_counts(settings: Settings, layer: str) -> list[dict[str, Any]]:
    """What the row-count baseline (``quality.baseline``) reads of ``layer``'s results, oldest
    first, shaped as ``read_results``' entries: the flat columns only, filtered as they are
    read. A gate step reads this, not the whole history with every failure's samples, so its
    cost does not grow with other layers' results and the entries' size."""
    import pyarrow.compute as pc

    from lambdalake.lake.delta_rs import read_rows

    columns = ("subject", "interval_start", "interval_end", "rows", "evaluated", "recorded_at")
    rows = read_rows(results_path(settings), pa.schema([SCHEMA.field(c) for c in columns]),
                     where=pc.field("layer") == layer)
    rows.sort(key=lambda row: row["recorded_at"])
    return [{"layer": layer, "subject": row["subject"],
             "start": row["interval_start"].isoformat(), "end": row["interval_end"].isoformat(),
             "rows": row["rows"], "evaluated": row["evaluated"],
             "recorded_at": row["recorded_at"].isoformat()} for row in rows]


def _row(entry: dict[str, Any]) -> dict[str, Any]:
    return {
        "layer": entry["layer"], "subject": entry["subject"], "suite": entry["suite"],
        "interval_start": datetime.fromisoformat(entry["start"]),
        "interval_end": datetime.fromisoformat(entry["end"]), "success": entry["success"],
        "critical_failures": len(entry["critical_failures"]),
        "warnings": len(entry["warnings"]), "evaluated": entry["evaluated"],
        "rows": entry["rows"], "seconds": entry["seconds"], "run_id": entry.get("run_id"),
        "recorded_at": datetime.fromisoformat(entry["recorded_at"]),
        "docs": entry.get("docs"),
        "entry": json.dumps(entry, default=str, separators=(",", ":")),
    }

