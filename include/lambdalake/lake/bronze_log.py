"""What bronze's commits added, read from its Delta log: which files, when, and the range of
event times each holds (the writer's file statistics), without reading bronze itself.

Finding the events that arrived after a batch slice was computed is a question about the
commits made since its bronze version, not about bronze's rows: a commit's JSON file lists
the files it added with their row count, the minimum and maximum of each column, and when
each was written (its arrival). Reading
the commits since the last look costs what was committed since, whatever bronze's size.
Files a compaction rewrote are not new data (``dataChange`` false) and are left out.

>>> files_added(settings.table_path(BRONZE_TABLE), after=41, through=45)  # doctest: +SKIP
[AddedFile(version=43, path='event_date=2026-11-23/part-0...parquet', rows=12, ...)]
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime

from lambdalake.lake.delta_rs import arrow_filesystem
from lambdalake.timeutil import parse_utc

EVENT_TIME = "occurred_at"


@dataclass(frozen=True)
class AddedFile:
    """One data file a commit added, with its rows' event-time range."""

    version: int                 # the commit that added it
    path: str                    # relative to the table's root, as the log names it
    rows: int
    first_event: datetime | None  # None: the writer kept no statistics
    last_event: datetime | None
    arrived_at: datetime | None = None  # the add action's modificationTime


def log_path(table_path: str, version: int) -> str:
    return f"{table_path.rstrip('/')}/_delta_log/{version:020d}.json"


def files_added(table_path: str, after: int, through: int) -> list[AddedFile]:
    """The data files the commits ``after`` + 1 .. ``through`` added, oldest first."""
    added: list[AddedFile] = []
    for version in range(after + 1, through + 1):
        filesystem, path = arrow_filesystem(log_path(table_path, version))
        with filesystem.open_input_stream(path) as commit:
            lines = commit.read().decode().splitlines()
        for line in lines:
            action = json.loads(line).get("add") if line else None
            if action is None or action.get("dataChange") is False:
                continue
            stats = json.loads(action.get("stats") or "{}")
            lowest = (stats.get("minValues") or {}).get(EVENT_TIME)
            highest = (stats.get("maxValues") or {}).get(EVENT_TIME)
            written = action.get("modificationTime")
            added.append(AddedFile(
                version, action["path"], int(stats.get("numRecords") or 0),
                parse_utc(lowest) if lowest else None, parse_utc(highest) if highest else None,
                datetime.fromtimestamp(written / 1000, UTC) if written else None))
    return added
