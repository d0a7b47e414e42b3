"""Small bookkeeping tables of the lake, read and written without Spark (delta-rs).

The view catalog and the batch publication log are a few rows per interval: a JVM for them
would cost more than the work. They are Delta tables beside the data, so they share its
storage, its atomic commits and its time travel. Appends from concurrent writers (two
backfill runs publishing at once) are blind appends, which Delta commits without conflict.
"""

from __future__ import annotations

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import CommitFailedError

_CREATE_ATTEMPTS = 3


def delta_rs_uri(path: str) -> str:
    """delta-rs spells Hadoop's ``s3a://`` as ``s3://``; local paths pass unchanged."""
    return "s3://" + path.removeprefix("s3a://") if path.startswith("s3a://") else path


def read_rows(path: str, schema: pa.Schema) -> list[dict]:
    """Every row of the table at ``path`` as dicts (none when it does not exist yet)."""
    uri = delta_rs_uri(path)
    if not DeltaTable.is_deltatable(uri):
        return []
    return pa.table(DeltaTable(uri).to_pyarrow_table()).select(schema.names).to_pylist()


def append_rows(path: str, schema: pa.Schema, rows: list[dict]) -> None:
    """Append ``rows`` in one commit (creating the table on first use)."""
    uri = delta_rs_uri(path)
    for attempt in range(_CREATE_ATTEMPTS):
        if not DeltaTable.is_deltatable(uri):
            try:
                DeltaTable.create(uri, schema=schema, mode="ignore")
            except CommitFailedError:  # another writer created it first: append to theirs
                if attempt == _CREATE_ATTEMPTS - 1:
                    raise
                continue
        break
    write_deltalake(uri, pa.Table.from_pylist(rows, schema=schema), mode="append")
