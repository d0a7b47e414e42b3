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
from urllib.parse import unquote

from lambdalake.lake.delta_rs import arrow_filesystem
from lambdalake.timeutil import as_utc, parse_utc

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


def files_added(table_path: str, after: int, through: int,
                known_by: datetime | None = None) -> list[AddedFile]:
    """The data files the commits ``after`` + 1 .. ``through`` added, oldest first.

    Commits older than the log's retention (``delta.logRetentionDuration``) are gone from
    it; the live files they added stand in for them (``files_of_expired_commits``), but
    for those written by ``known_by`` (when commit ``after`` was read: they are older)."""
    added: list[AddedFile] = []
    seen: set[str] = set()  # every file a read commit added, data change or not
    expired, first_read = False, through + 1
    for version in range(after + 1, through + 1):
        filesystem, path = arrow_filesystem(log_path(table_path, version))
        try:
            with filesystem.open_input_stream(path) as commit:
                lines = commit.read().decode().splitlines()
        except FileNotFoundError:
            if first_read <= through:
                raise  # a gap after a commit that was read: not what retention does
            expired = True
            continue
        first_read = min(first_read, version)
        for line in lines:
            action = json.loads(line).get("add") if line else None
            if action is None:
                continue
            seen.add(unquote(action["path"]))
            if action.get("dataChange") is False:
                continue
            stats = json.loads(action.get("stats") or "{}")
            lowest = (stats.get("minValues") or {}).get(EVENT_TIME)
            highest = (stats.get("maxValues") or {}).get(EVENT_TIME)
            written = action.get("modificationTime")
            added.append(AddedFile(
                version, action["path"], int(stats.get("numRecords") or 0),
                parse_utc(lowest) if lowest else None, parse_utc(highest) if highest else None,
                datetime.fromtimestamp(written / 1000, UTC) if written else None))
    if expired:
        added[:0] = [file for file in files_of_expired_commits(
                         table_path, through, seen, first_read - 1)
                     if known_by is None or file.arrived_at is None
                     or file.arrived_at > known_by]
    return added


def files_of_expired_commits(table_path: str, through: int, seen: set[str],
                             version: int) -> list[AddedFile]:
    """The live files (at ``through``) that no read commit added: commits that left the log
    added them. Each is dated ``version``, the newest such a commit can be, so a window
    published from an older bronze version counts its rows as late at worst (a restatement
    then recomputes the window and changes nothing) and never misses one."""
    import pyarrow as pa
    from deltalake import DeltaTable

    from lambdalake.lake.delta_rs import delta_rs_uri

    live = pa.table(DeltaTable(delta_rs_uri(table_path), version=through)
                    .get_add_actions(flatten=True))
    columns = live.schema.names
    files = []
    for row in live.to_pylist():
        if unquote(row["path"]) in seen:
            continue
        lowest, highest = (row.get(f"{bound}.{EVENT_TIME}") if f"{bound}.{EVENT_TIME}" in columns
                           else None for bound in ("min", "max"))
        written = row.get("modification_time")  # milliseconds, as the log has it
        files.append(AddedFile(
            version, row["path"], int(row.get("num_records") or 0),
            None if lowest is None else as_utc(lowest, naive_is_utc=True),
            None if highest is None else as_utc(highest, naive_is_utc=True),
            None if written is None else datetime.fromtimestamp(written / 1000, UTC)))
    return files
