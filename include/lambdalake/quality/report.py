"""The recorded gate results as people read them: newest first, one line each, in a table.

Reads the history ``lambdalake.quality.history`` appends to; ``lambdalake quality``,
``lambdalake report`` and ``make demo`` print it, the query API serves it.
"""

from __future__ import annotations

from collections import Counter
from typing import Any


def verdict(result: dict[str, Any]) -> str:
    """``passed``, ``passed, 2 warnings`` or ``FAILED: check, check``."""
    if not result["success"]:
        failed = [o["check"] for o in result["critical_failures"]] or ["did not run"]
        return "FAILED: " + ", ".join(failed)
    warnings = len(result["warnings"])
    return "passed" + (f", {warnings} warning{'s' * (warnings != 1)}" if warnings else "")


def recent(results: list[dict[str, Any]], layer: str | None = None, limit: int = 20, *,
           subject: str | None = None, failed_only: bool = False) -> list[dict[str, Any]]:
    """The newest ``limit`` results (of ``layer``, of ``subject``, only failed ones if
    ``failed_only``), newest first: what ``lambdalake quality`` and the query API's
    ``/quality/results`` answer."""
    chosen = [r for r in results
              if (layer is None or r["layer"] == layer)
              and (subject is None or r["subject"] == subject)
              and not (failed_only and r["success"])]
    return sorted(chosen, key=lambda r: r["recorded_at"], reverse=True)[:limit]


def table(results: list[dict[str, Any]]) -> str:
    """One aligned line per result: when, layer, subject, interval, rows, verdict."""
    header = ("recorded (UTC)", "layer", "subject", "interval", "rows", "verdict")
    lines = [(r["recorded_at"][:19].replace("T", " "), r["layer"], r["subject"],
              f"[{r['start'][:16]}, {r['end'][:16]})", str(r["rows"]), verdict(r))
             for r in results]
    widths = [max(len(row[i]) for row in [header, *lines]) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
                     .rstrip() for row in [header, *lines])


def per_layer(results: list[dict[str, Any]]) -> dict[str, Counter[str]]:
    """Per layer: gate runs, failed runs, runs with warnings."""
    counts: dict[str, Counter[str]] = {}
    for result in results:
        layer = counts.setdefault(result["layer"], Counter())
        layer["runs"] += 1
        layer["failed"] += not result["success"]
        layer["with warnings"] += bool(result["warnings"])
    return counts


def summary(results: list[dict[str, Any]], newest: int = 6) -> list[str]:
    """Per layer the gate runs, failures and warnings, then the newest few results."""
    lines = [f"{layer:<8} {counts['runs']} gate runs, {counts['failed']} failed, "
             f"{counts['with warnings']} with warnings"
             for layer, counts in sorted(per_layer(results).items())]
    return lines + table(recent(results, limit=newest)).splitlines()
