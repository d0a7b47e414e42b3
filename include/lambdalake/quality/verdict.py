"""The verdict of a quality gate, whatever ran it: GX suites on Spark or pandas, or the
serving step's reconciliation. No Great Expectations here, so any layer can build, record
and enforce a verdict without importing GX."""

from __future__ import annotations

import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import numpy as np

from lambdalake.lake.bronze import BRONZE_TABLE
from lambdalake.quality.report import explanation, observed

CRITICAL = "critical"
WARNING = "warning"


@dataclass(frozen=True)
class ExpectationOutcome:
    """One expectation that failed (or could not be evaluated)."""

    check: str                      # stable name from the suite, e.g. "not_null:page"
    expectation: str                # GX expectation type
    column: str | None              # the column, or "a,b" for several
    severity: str                   # "critical" | "warning"
    rule: str = ""                  # why the expectation exists
    observed: Any = None            # GX's observed value, if any
    unexpected_count: int | None = None
    samples: list[Any] = field(default_factory=list)  # a few unexpected values or rows
    error: str | None = None        # set when the expectation raised instead of evaluating
    explained_by: dict[str, int] = field(default_factory=dict)
    """An explained drift's reach: per joined entity, how many of its changed keys explain
    the differing rows (``serving.maintenance``); empty for every other outcome."""
    bounds: str = ""
    """What the observed value had to be, with the values GX used (``at most 0.2``)."""

    def describe(self) -> str:
        if self.error is not None:
            return f"{self.check}: did not evaluate: {self.error}"
        parts = []
        if self.unexpected_count is not None:
            parts.append(f"{self.unexpected_count} unexpected")
        elif self.observed is not None:
            parts.append(observed(self.observed, self.bounds))
        if self.explained_by:
            parts.append(explanation(self.explained_by))
        if self.samples:
            parts.append(f"e.g. {self.samples}")
        detail = ", ".join(parts) or "failed"
        return f"{self.check} ({self.expectation}): {detail} [{self.rule}]"


LAYERS = ("bronze", "reference", "batch", "realtime", "serving", "restatement")
"""The layers whose gates record results: every ``GateResult`` names one, and the quality
history, ``lambdalake quality --layer`` and the API's ``/quality/results`` take them all."""


@dataclass(frozen=True)
class GateResult:
    """The verdict of one gate on one slice."""

    layer: str                      # one of LAYERS
    subject: str                    # "bronze_events" or the view name
    start: datetime
    end: datetime
    success: bool                   # False iff a critical failure, or validation did not run
    critical_failures: list[ExpectationOutcome]
    warnings: list[ExpectationOutcome]
    evaluated: int                  # expectations evaluated
    rows: int                       # rows in the slice
    seconds: float = 0.0            # wall time of the gate
    validation: Any = field(default=None, repr=False, compare=False)
    """GX's validation result (failing expectations with their details), for Data Docs."""

    def __post_init__(self) -> None:
        if self.layer not in LAYERS:  # what reports and the API could not be asked for
            raise ValueError(f"gate layer {self.layer!r} is none of {', '.join(LAYERS)}")

    @property
    def interval(self) -> str:
        """``[2026-11-20 10:00, 2026-11-20 11:00)``; with seconds when a bound needs them
        (a real-time gate's write times)."""
        whole_minutes = all(t.second == t.microsecond == 0 for t in (self.start, self.end))
        shown = "%Y-%m-%d %H:%M" if whole_minutes else "%Y-%m-%d %H:%M:%S"
        return f"[{self.start:{shown}}, {self.end:{shown}})"

    @property
    def data_failed(self) -> bool:
        """The gate evaluated its suite and the data failed a critical check (no failure is
        an error of the gate itself): validating again would fail the same way."""
        return not self.success and all(o.error is None for o in self.critical_failures)

    def summary(self) -> str:
        """One line: ``gate bronze [..): passed, 26 expectations, 0 warnings, ...``."""
        name = "bronze" if self.subject == BRONZE_TABLE else f"{self.layer} {self.subject}"
        verdict = ("passed" if self.success
                   else f"FAILED, {len(self.critical_failures)} critical failures")
        return (f"gate {name} {self.interval}: {verdict}, {self.evaluated} expectations, "
                f"{len(self.warnings)} warnings, {self.rows} rows, {self.seconds:.1f} s")

    def report(self) -> str:
        """The summary, then one indented line per critical failure and per warning."""
        lines = [self.summary()]
        lines += [f"  critical {o.describe()}" for o in self.critical_failures]
        lines += [f"  warning {o.describe()}" for o in self.warnings]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        def outcome(o: ExpectationOutcome) -> dict[str, Any]:
            return {"check": o.check, "expectation": o.expectation, "column": o.column,
                    "severity": o.severity, "rule": o.rule, "observed": json_ready(o.observed),
                    "bounds": o.bounds,
                    "unexpected_count": o.unexpected_count, "samples": json_ready(o.samples),
                    "error": o.error, **({"explained_by": o.explained_by} if o.explained_by
                                         else {})}

        return {
            "layer": self.layer, "subject": self.subject, "start": self.start.isoformat(),
            "end": self.end.isoformat(), "success": self.success,
            "critical_failures": [outcome(o) for o in self.critical_failures],
            "warnings": [outcome(o) for o in self.warnings],
            "evaluated": self.evaluated, "rows": self.rows, "seconds": round(self.seconds, 3),
        }


class GateFailed(RuntimeError):
    """A gate did not pass; ``result`` is its ``GateResult``, the message lists failures."""

    def __init__(self, result: GateResult) -> None:
        super().__init__(result.report())
        self.result = result


def enforce(result: GateResult) -> None:
    """Raise ``GateFailed`` unless the gate passed."""
    if not result.success:
        raise GateFailed(result)


def did_not_run(layer: str, subject: str, start: datetime, end: datetime,
                error: BaseException, began: float) -> GateResult:
    """The failed result of a gate whose validation raised: a gate never passes silently."""
    message = "".join(traceback.format_exception_only(type(error), error)).strip()
    outcome = ExpectationOutcome("validation", "(gate)", None, CRITICAL,
                                 "a gate must evaluate its suite",
                                 error=f"validation did not run: {message[:2000]}")
    return GateResult(layer, subject, start, end, success=False, critical_failures=[outcome],
                      warnings=[], evaluated=0, rows=0, seconds=time.monotonic() - began)


def json_ready(value: Any) -> Any:
    """JSON-ready: timestamps as ISO strings, decimals as strings, rows as dicts.

    A time-zone-aware timestamp (the local engine's pandas values) is written as its UTC
    wall-clock time, as the Spark session (in UTC) returns timestamps: a sample reads the
    same whichever engine validated the slice."""
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(UTC).replace(tzinfo=None).isoformat()
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [json_ready(v) for v in value]
    if hasattr(value, "asDict"):
        return json_ready(value.asDict())
    if isinstance(value, np.generic):  # pandas validations report numpy scalars
        return json_ready(value.item())
    return value
