"""What a batch step wrote, as the Spark step reports it and the DAG's tasks pass it on: a
module of its own, light, so the Airflow tasks that read it import no Spark, Arrow or Delta.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from lambdalake.timeutil import parse_utc

RESULT_PREFIX = "result "
"""How ``spark_jobs/batch_views.py`` marks the line of each slice it wrote in its output."""


@dataclass(frozen=True)
class SliceWritten:
    """One slice a batch step wrote: crosses the process boundary as a ``result`` line of
    the Spark step's output and the DAG's tasks as XCom (``to_xcom``), typed on both ends."""

    view: str
    start: datetime
    end: datetime
    rows: int
    bronze_version: int
    view_version: int
    table_version: int

    def to_xcom(self) -> dict[str, Any]:
        return {**asdict(self), "start": self.start.isoformat(), "end": self.end.isoformat()}

    @classmethod
    def from_xcom(cls, value: dict[str, Any]) -> SliceWritten:
        return cls(**{**value, "start": parse_utc(value["start"]),
                      "end": parse_utc(value["end"])})

    def result_line(self) -> str:
        return RESULT_PREFIX + json.dumps(self.to_xcom())

    def describe(self, written_to: str) -> str:
        """The task log's line, each version named for what it counts: ``funnel
        [2026-12-02 00:00, 2026-12-03 00:00): 24 rows from bronze's Delta version 7 into the
        run's staging table for view version 1, now at Delta version 0``."""
        return (f"{self.view} [{self.start:%Y-%m-%d %H:%M}, {self.end:%Y-%m-%d %H:%M}): "
                f"{self.rows} rows from bronze's Delta version {self.bronze_version} into "
                f"{written_to}, now at Delta version {self.table_version}")


GATED_BRONZE_PREFIX = "gated bronze version "
"""The line the bronze gate step prints: the bronze version it validated, which the run's
``compute`` reads and no other."""


def gated_bronze_line(version: int) -> str:
    return f"{GATED_BRONZE_PREFIX}{version}"


def parse_gated_bronze(lines: list[str]) -> int:
    """The bronze version a gate step's output says it validated."""
    found = [int(line[len(GATED_BRONZE_PREFIX):]) for line in lines
             if line.startswith(GATED_BRONZE_PREFIX)]
    if len(found) != 1:
        raise ValueError(f"the bronze gate reported {len(found)} gated versions, not one")
    return found[0]


def parse_results(lines: list[str]) -> list[SliceWritten]:
    """The slices a Spark step's output reports (its ``result`` lines)."""
    return [SliceWritten.from_xcom(json.loads(line[len(RESULT_PREFIX):])) for line in lines
            if line.startswith(RESULT_PREFIX)]
