"""Exactly-once appends of a streaming query's micro-batches, without a state rebuild each.

Delta's idempotent writes (``txnAppId``/``txnVersion``) look a query's last batch up in the
table's reconstructed state, which Spark's Delta builds anew for every table version: three
Spark jobs, 0.5-0.8 s per table and micro-batch on this machine, half of a small batch's
time in ingest. A ``BatchLedger`` records the batch in its commit's own metadata instead
(``userMetadata``: atomic with the rows) and remembers what it committed. It reads a
table's log only to learn where its query left off: once per table after the query
starts, newest commits first (delta-rs, no Spark job).

A commit older than the table's log retention (``delta.logRetentionDuration``, 30 days by
default) is gone from the log. If none of the query's commits is left in the log of a table
it writes every batch, whether its batch in doubt committed cannot be known, and
``BatchInDoubt`` stops the query instead of guessing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from lambdalake.lake.delta_rs import delta_rs_uri, table_exists

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

MARKER = "lambdalake_batch"
"""The key of a ledger commit's ``userMetadata`` (a JSON object): ``{app, batch}``."""
FIRST_PAGE = 100
"""Commits read at first when looking for a query's last one (then ten times more)."""


class BatchInDoubt(RuntimeError):
    """None of a query's commits is left in a table's log, which has lost old commits: the
    batch to run may have committed before them."""


def marker(app_id: str, batch_id: int) -> str:
    """The ``userMetadata`` of a ledger commit."""
    return json.dumps({MARKER: {"app": app_id, "batch": batch_id}})


def batch_of(commit: dict[str, Any], app_id: str) -> int | None:
    """The batch a commit (a commit info of the log) recorded for ``app_id``, if any."""
    try:
        recorded = json.loads(commit.get("userMetadata") or "")[MARKER]
    except (ValueError, TypeError, KeyError):
        return None  # no metadata, or someone else's
    if not isinstance(recorded, dict) or recorded.get("app") != app_id:
        return None
    batch = recorded.get("batch")
    return batch if isinstance(batch, int) else None


def last_committed(path: str, app_id: str) -> tuple[int, bool]:
    """The last batch ``app_id`` committed to the table at ``path`` (-1: none or no table),
    and whether the log was found complete (it still holds version 0) when none was."""
    from deltalake import DeltaTable

    if not table_exists(path):
        return -1, True
    table = DeltaTable(delta_rs_uri(path), without_files=True)
    limit = FIRST_PAGE
    while True:
        commits = table.history(limit)  # newest first
        for commit in commits:
            batch = batch_of(commit, app_id)
            if batch is not None:
                return batch, True
        if len(commits) < limit:
            complete = not commits or min(commit["version"] for commit in commits) == 0
            return -1, complete
        limit *= 10


class BatchLedger:
    """Appends one streaming query's micro-batches to Delta tables, each batch once per table.

    Make one per query run (a restarted query reads the logs again): it trusts what it
    committed itself, so only one query may write a table as ``app_id``."""

    def __init__(self, app_id: str) -> None:
        self.app_id = app_id
        self._committed: dict[str, int] = {}

    def committed(self, path: str, batch_id: int, *, every_batch: bool = True) -> int:
        """The last batch committed to ``path``; read from its log on first use.
        ``every_batch``: the table gets a commit for every batch (see ``BatchInDoubt``)."""
        if path not in self._committed:
            last, complete = last_committed(path, self.app_id)
            if every_batch and last < 0 < batch_id and not complete:
                raise BatchInDoubt(
                    f"{path}: none of query {self.app_id}'s commits is left in the table's "
                    f"log, which lost commits older than its log retention; whether batch "
                    f"{batch_id} committed cannot be told. Compare the batch's offsets "
                    f"(its checkpoint's offsets/{batch_id}) with the table, then start the "
                    f"query from a new checkpoint at the right offsets")
            self._committed[path] = last
        return self._committed[path]

    def append(self, frame: DataFrame, path: str, partition: str, batch_id: int, *,
               every_batch: bool = True, rows: int | None = None,
               properties: Mapping[str, str] | None = None) -> bool:
        """Append ``frame`` as batch ``batch_id`` unless ``path`` committed it; whether it
        did now. Without ``every_batch`` an empty frame commits nothing (a commit costs about
        0.3 s; a replay finds the same frame empty); ``rows``, the frame's exact row count
        if known, spares the Spark job that looks (a wrong 0 would drop the batch).
        ``properties``: the ``delta.*`` table properties the first write creates the table
        with (Delta ignores them after)."""
        if self.committed(path, batch_id, every_batch=every_batch) >= batch_id:
            return False
        if not every_batch and (frame.isEmpty() if rows is None else rows == 0):
            return False
        (
            frame.write.format("delta").mode("append")
            .options(**(properties or {}))
            .option("userMetadata", marker(self.app_id, batch_id))
            .option("mergeSchema", "true")  # a new optional contract field adds a column
            .partitionBy(partition)
            .save(path)
        )
        self._committed[path] = batch_id
        return True
