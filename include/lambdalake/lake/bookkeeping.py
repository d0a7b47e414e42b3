"""Small bookkeeping tables of the lake, read and written without Spark (delta-rs).

The view catalog and the batch publication log are a few rows per interval: a JVM for them
would cost more than the work. They are Delta tables beside the data, so they share its
storage, its atomic commits and its time travel. Appends from concurrent writers (two
backfill runs publishing at once) are blind appends, which Delta commits without conflict.
"""

from __future__ import annotations

import time

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError

_ATTEMPTS = 5


def delta_rs_uri(path: str) -> str:
    """delta-rs spells Hadoop's ``s3a://`` as ``s3://``; local paths pass unchanged."""
    return "s3://" + path.removeprefix("s3a://") if path.startswith("s3a://") else path


class FollowedTable:
    """One Delta table, followed across versions: opened once, then brought up to date with
    the commits made since (opening it by path replays up to a hundred commit files)."""

    def __init__(self, path: str) -> None:
        self.uri = delta_rs_uri(path)
        self.table: DeltaTable | None = None

    def refresh(self) -> int | None:
        """The table's newest version, or None while it does not exist."""
        if self.table is None:
            if not DeltaTable.is_deltatable(self.uri):
                return None
            self.table = DeltaTable(self.uri)
        else:
            self.table.update_incremental()
        return self.table.version()


def read_rows(path: str, schema: pa.Schema) -> list[dict]:
    """Every row of the table at ``path`` as dicts (none when it does not exist yet)."""
    uri = delta_rs_uri(path)
    if not DeltaTable.is_deltatable(uri):
        return []
    return pa.table(DeltaTable(uri).to_pyarrow_table()).select(schema.names).to_pylist()


def row_count(path: str) -> int:
    """Rows in the table at ``path`` from its file statistics (0 when it does not exist)."""
    uri = delta_rs_uri(path)
    return DeltaTable(uri).to_pyarrow_dataset().count_rows() if DeltaTable.is_deltatable(uri) else 0


def append_rows(path: str, schema: pa.Schema, rows: list[dict]) -> int:
    """Append ``rows`` in one commit (creating the table on first use); return the table's
    version right after (a cadence for maintenance such as ``compact``).

    Writers that find the table missing at the same moment race to create it; the loser's
    create may land as a metadata commit right after the winner's, which fails appends that
    read the table before it ("Metadata changed since last commit"). A failed commit wrote
    nothing, so the append is simply tried again.
    """
    uri = delta_rs_uri(path)
    for attempt in range(_ATTEMPTS):
        try:
            if not DeltaTable.is_deltatable(uri):
                DeltaTable.create(uri, schema=schema, mode="ignore")
            write_deltalake(uri, pa.Table.from_pylist(rows, schema=schema), mode="append")
            return DeltaTable(uri).version()
        except CommitFailedError:
            if attempt == _ATTEMPTS - 1:
                raise
            time.sleep(0.05 * (attempt + 1))
    raise AssertionError("unreachable")


def compact(path: str) -> None:
    """Rewrite the table's small files as few large ones (readers see the same rows).

    Opportunistic: if it fails (say, it lost to a concurrent writer), the files stay as
    they are until the next time; nothing is lost either way.
    """
    try:
        DeltaTable(delta_rs_uri(path)).optimize.compact()
    except DeltaError:
        pass
