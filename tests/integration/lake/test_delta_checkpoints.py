"""Delta checkpoints written beside a stream's commits, never inside them (``CheckpointWriter``)."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from deltalake import DeltaTable

from lambdalake.lake.checkpoints import (
    CHECKPOINT_INTERVAL,
    NO_CHECKPOINT_IN_COMMIT,
    CheckpointWriter,
)
from lambdalake.settings import Settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def checkpoints(path: str) -> list[int]:
    """The versions the table's log holds a checkpoint of."""
    return sorted(int(file.name.split(".")[0])
                  for file in Path(path, "_delta_log").glob("*.checkpoint.parquet"))


def last_checkpoint(path: str) -> int:
    return int(json.loads(Path(path, "_delta_log", "_last_checkpoint").read_text())["version"])


def test_a_table_is_checkpointed_every_n_commits_by_the_writer_and_never_in_a_commit(
    spark: SparkSession, settings: Settings
) -> None:
    path = settings.table_path(f"test_checkpoints_{uuid.uuid4().hex[:8]}")
    not_yet = settings.table_path(f"test_checkpoints_{uuid.uuid4().hex[:8]}")

    def commit(version: int) -> None:
        (spark.range(version, version + 1).write.format("delta").mode("append")
         .option(CHECKPOINT_INTERVAL, NO_CHECKPOINT_IN_COMMIT).save(path))

    writer = CheckpointWriter(spark, [path, not_yet], every=3)
    assert writer.check_once() == []  # no table yet: nothing to do, no error
    for version in range(12):  # Delta's own interval (10) would have checkpointed version 10
        commit(version)
    assert checkpoints(path) == []
    assert writer.check_once() == [(path, 11)]
    assert checkpoints(path) == [11] and last_checkpoint(path) == 11
    commit(12)
    commit(13)
    assert writer.check_once() == []  # two commits past the checkpoint, not three
    commit(14)
    assert writer.check_once() == [(path, 14)]
    assert checkpoints(path) == [11, 14]

    with CheckpointWriter(spark, [path], every=1, poll_seconds=0.1):  # its thread
        commit(15)
        deadline = time.monotonic() + 60
        # the checkpoint's file, not _last_checkpoint, which Delta replaces (briefly absent)
        while 15 not in checkpoints(path) and time.monotonic() < deadline:
            time.sleep(0.2)
    # leaving the block waited for the thread's checkpoint to finish
    assert checkpoints(path) == [11, 14, 15] and last_checkpoint(path) == 15
    table = DeltaTable(path)  # read from the newest checkpoint, by another reader
    assert table.version() == 15
    assert sorted(table.to_pyarrow_table().column("id").to_pylist()) == list(range(16))
    assert sorted(r.id for r in spark.read.format("delta").load(path).collect()) == list(range(16))
