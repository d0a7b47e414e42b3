"""The batch ledger's reading of a table's log (delta-rs, no Spark): where a query left off."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import CommitProperties, DeltaTable, write_deltalake

from lambdalake.lake import ledger
from lambdalake.lake.ledger import BatchInDoubt, BatchLedger, batch_of, last_committed, marker

ROW = pa.table({"n": [1]})


def commit(path: Path, user_metadata: str | None = None) -> None:
    """One append, as another writer or as a query's batch (``marker``)."""
    write_deltalake(str(path), ROW, mode="append", commit_properties=CommitProperties(
        custom_metadata={"userMetadata": user_metadata} if user_metadata else None))


def test_a_commit_names_its_batch_for_its_app_only() -> None:
    assert batch_of({"userMetadata": marker("ingest-1", 7)}, "ingest-1") == 7
    assert batch_of({"userMetadata": marker("ingest-1", 7)}, "ingest-2") is None
    for foreign in ({}, {"userMetadata": "nightly fix"}, {"userMetadata": '{"a": 1}'},
                    {"userMetadata": '{"lambdalake_batch": {"app": "ingest-1"}}'}):
        assert batch_of(foreign, "ingest-1") is None


def test_the_last_batch_is_found_behind_other_writers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ledger, "FIRST_PAGE", 2)  # so the search reads a second page
    assert last_committed(str(tmp_path / "none"), "ingest-1") == (-1, True)
    table = tmp_path / "bronze"
    for batch in range(3):
        commit(table, marker("ingest-1", batch))
        commit(table, marker("ingest-0", 10 + batch))  # another query's (an older checkpoint)
    for _ in range(3):
        commit(table, "compaction")
    assert last_committed(str(table), "ingest-1") == (2, True)
    assert BatchLedger("ingest-1").committed(str(table), 3) == 2
    assert last_committed(str(table), "ingest-9") == (-1, True)


def test_a_batch_whose_commit_left_the_log_is_in_doubt(tmp_path: Path) -> None:
    table = tmp_path / "bronze"
    commit(table, marker("ingest-1", 0))
    for _ in range(3):
        commit(table, "compaction")
    DeltaTable(str(table)).create_checkpoint()
    for old in ("00000000000000000000.json", "00000000000000000001.json"):
        (table / "_delta_log" / old).unlink()  # what log retention removes

    assert last_committed(str(table), "ingest-1") == (-1, False)
    with pytest.raises(BatchInDoubt, match="batch 1 committed cannot be told"):
        BatchLedger("ingest-1").committed(str(table), 1)
    # a table that gets commits only for some batches, or a query's first batch, is not
    assert BatchLedger("ingest-1").committed(str(table), 1, every_batch=False) == -1
    assert BatchLedger("ingest-1").committed(str(table), 0) == -1


def test_the_ledger_reads_a_log_once_and_then_trusts_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = tmp_path / "bronze"
    commit(table, marker("ingest-1", 5))
    batches = BatchLedger("ingest-1")
    assert batches.committed(str(table), 6) == 5
    monkeypatch.setattr(ledger, "last_committed", pytest.fail)
    assert batches.committed(str(table), 6) == 5
