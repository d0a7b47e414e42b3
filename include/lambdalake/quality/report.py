"""The recorded gate results as people read them, whichever surface shows them.

Reads the history ``lambdalake.quality.history`` appends to; ``lambdalake quality``,
``lambdalake report`` and ``make demo`` print it, the query API serves it, and the Data
quality page (``lambdalake.quality.page``) renders the same selections as HTML. Two orders
matter and are kept apart by name: *most recently recorded* (what a run did last) and
*newest data interval* (how far a subject's data is judged: a restatement of an older hour,
recorded later, is not the newest interval).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

OUTCOME_FIELDS = {"critical": "critical_failures", "warning": "warnings"}
"""Where a result keeps the outcomes of each severity: failures fail a gate, warnings not."""


def verdict(result: dict[str, Any]) -> str:
    """``passed``, ``passed, 2 warnings`` or ``FAILED: check, check``."""
    if not result["success"]:
        failed = [o["check"] for o in result["critical_failures"]] or ["did not run"]
        return "FAILED: " + ", ".join(failed)
    warnings = len(result["warnings"])
    return "passed" + (f", {warnings} warning{'s' * (warnings != 1)}" if warnings else "")


def status(result: dict[str, Any]) -> str:
    """``passed``, ``warning`` or ``failed``: a verdict as a state (a page's CSS class, a
    Data Docs page's icon)."""
    if not result["success"]:
        return "failed"
    return "warning" if result["warnings"] else "passed"


def recent(results: list[dict[str, Any]], layer: str | None = None, limit: int = 20, *,
           subject: str | None = None, failed_only: bool = False) -> list[dict[str, Any]]:
    """The ``limit`` most recently recorded results (of ``layer``, of ``subject``, only
    failed ones if ``failed_only``), most recently recorded first: what ``lambdalake
    quality`` and the query API's ``/quality/results`` answer."""
    chosen = [r for r in results
              if (layer is None or r["layer"] == layer)
              and (subject is None or r["subject"] == subject)
              and not (failed_only and r["success"])]
    return sorted(chosen, key=lambda r: r["recorded_at"], reverse=True)[:limit]


@dataclass(frozen=True)
class Subject:
    """One layer's subject: the verdict of its newest data interval, and its history."""

    layer: str
    subject: str
    newest: dict[str, Any]
    """The result of the newest data interval (largest end, then start), as last recorded."""
    recorded: list[dict[str, Any]]
    """Every result of the subject, most recently recorded first."""


def per_subject(results: list[dict[str, Any]]) -> list[Subject]:
    """Per (layer, subject), in that order, its newest data interval's verdict and history."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for result in recent(results, limit=len(results)):
        groups.setdefault((result["layer"], result["subject"]), []).append(result)
    # max keeps the first of equal intervals: the most recently recorded verdict of it
    return [Subject(layer, subject, max(group, key=lambda r: (r["end"], r["start"])), group)
            for (layer, subject), group in sorted(groups.items())]


@dataclass(frozen=True)
class Repeated:
    """One expectation's outcome on one subject and data interval, however many gate runs
    recorded it (the serving DAG judges the same windows at each of its runs)."""

    result: dict[str, Any]
    """The most recent result that recorded it."""
    outcome: dict[str, Any]
    """Its outcome there (what it found, its samples)."""
    times: int
    first_recorded: str


def outcomes(results: list[dict[str, Any]], severity: str) -> list[Repeated]:
    """The outcomes of ``severity`` (``critical`` or ``warning``) in ``results``, one per
    (layer, subject, interval, expectation), most recently recorded first."""
    found: dict[tuple[str, ...], list[tuple[dict[str, Any], dict[str, Any]]]] = {}
    for result in recent(results, limit=len(results)):
        for outcome in result[OUTCOME_FIELDS[severity]]:
            key = (result["layer"], result["subject"], result["start"], result["end"],
                   outcome["check"])
            found.setdefault(key, []).append((result, outcome))
    return [Repeated(*repeats[0], times=len(repeats), first_recorded=repeats[-1][0]["recorded_at"])
            for repeats in found.values()]


def explanation(explained_by: Mapping[str, int]) -> str:
    """``explained by 3 changed product keys``: how far an explained drift's explanation
    reaches, in the task log (``ExpectationOutcome.describe``) and in every report."""
    reach = " and ".join(f"{count} changed {entity} key{'s' * (count != 1)}"
                         for entity, count in sorted(explained_by.items()))
    return f"explained by {reach}"


def observed(value: Any, bounds: str = "") -> str:
    """``observed 1.0 (at most 0.2)``: an observed value, with the bounds it broke when known,
    so a threshold shows as its value, not as a setting's name."""
    return f"observed {cell(value)}" + (f" ({bounds})" if bounds else "")


def found(outcome: dict[str, Any]) -> str:
    """What an outcome found: its error, how many rows were unexpected or the observed
    value, and how far an explanation reaches (``explained_by``; older records lack it)."""
    if outcome.get("error"):
        return str(outcome["error"])
    seen = (f"{outcome['unexpected_count']} unexpected"
            if outcome.get("unexpected_count") is not None
            else observed(outcome.get("observed"), outcome.get("bounds") or ""))
    explained = outcome.get("explained_by")
    return f"{seen}, {explanation(explained)}" if explained else seen


def cell(value: Any) -> str:
    """A value as a table shows it: text as it is, anything else as JSON (a nested row or
    a list, a null), never a Python repr."""
    return value if isinstance(value, str) else json.dumps(value, default=str)


def samples_table(samples: list[Any]) -> tuple[list[str], list[list[str]]]:
    """An outcome's samples as a table: rows (dicts) by their keys (a key a row lacks is
    empty), single values as one column ``value``."""
    if samples and all(isinstance(sample, dict) for sample in samples):
        columns = list(dict.fromkeys(key for sample in samples for key in sample))
        return columns, [[cell(sample[c]) if c in sample else "" for c in columns]
                         for sample in samples]
    return ["value"], [[cell(sample)] for sample in samples]


def moment(recorded_at: str) -> str:
    """``2026-11-20 12:05:03``: a recording time to the second."""
    return recorded_at[:19].replace("T", " ")


def aligned(header: list[str], rows: list[list[str]], indent: str = "") -> list[str]:
    """``rows`` under ``header`` in columns as wide as their widest cell."""
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    return [(indent + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True))).rstrip()
            for row in [header, *rows]]


def _interval(result: dict[str, Any]) -> str:
    return f"[{result['start'][:16]}, {result['end'][:16]})"


def table(results: list[dict[str, Any]], indent: str = "") -> str:
    """One aligned line per result: when recorded, layer, subject, interval, rows, verdict."""
    return "\n".join(aligned(
        ["recorded (UTC)", "layer", "subject", "interval", "rows", "verdict"],
        [[moment(r["recorded_at"]), r["layer"], r["subject"], _interval(r), str(r["rows"]),
          verdict(r)] for r in results], indent))


def per_layer(results: list[dict[str, Any]]) -> dict[str, Counter[str]]:
    """Per layer: gate runs, failed runs, runs with warnings."""
    counts: dict[str, Counter[str]] = {}
    for result in results:
        layer = counts.setdefault(result["layer"], Counter())
        layer["runs"] += 1
        layer["failed"] += not result["success"]
        layer["with warnings"] += bool(result["warnings"])
    return counts


def outcome_lines(repeated: list[Repeated], severity: str, limit: int) -> list[str]:
    """The ``limit`` most recently recorded outcomes of ``severity``: a line each (subject,
    interval, expectation, what it found, how often recorded), its samples below it."""
    title = "Failures (critical)" if severity == "critical" else "Warnings"
    shown = repeated[:limit]
    lines = [f"{title}, most recently recorded first ({len(shown)} of {len(repeated)}):"
             if repeated else f"{title}: none"]
    for one in shown:
        result, outcome = one.result, one.outcome
        times = (f"recorded {one.times} times, last {moment(result['recorded_at'])}"
                 if one.times > 1 else f"recorded {moment(result['recorded_at'])}")
        lines.append(f"  {result['layer']} {result['subject']} {_interval(result)} "
                     f"{outcome['check']}: {found(outcome)} ({times})")
        if outcome.get("samples"):
            lines += aligned(*samples_table(outcome["samples"]), indent="      ")
    return lines


def summary(results: list[dict[str, Any]], newest: int = 6) -> list[str]:
    """Per layer the gate runs, failures and warnings; per subject its newest data interval
    and that interval's verdict; the failures and, apart from them, the warnings (one per
    subject, interval and expectation, at most ``newest`` each); the ``newest`` most
    recently recorded results."""
    lines = [f"{layer:<8} {counts['runs']} gate runs, {counts['failed']} failed, "
             f"{counts['with warnings']} with warnings"
             for layer, counts in sorted(per_layer(results).items())]
    lines += ["", "Newest data interval per layer and subject (its verdict as last recorded):",
              *aligned(["layer", "subject", "newest data interval", "verdict"],
                       [[s.layer, s.subject, _interval(s.newest), verdict(s.newest)]
                        for s in per_subject(results)], indent="  ")]
    for severity in OUTCOME_FIELDS:
        lines += ["", *outcome_lines(outcomes(results, severity), severity, newest)]
    return [*lines, "", "Most recently recorded:",
            *table(recent(results, limit=newest), indent="  ").splitlines()]
