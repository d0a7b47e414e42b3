"""SIGKILL the ingest job repeatedly under load: no Kafka record is lost or written twice."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from deltalake import DeltaTable

from lambdalake.generator.traffic import TrafficProfile
from lambdalake.ingest.service import ingest_process, start_ingest_process, wait_caught_up
from lambdalake.ingest.status import QUERY_NAME
from lambdalake.lake.bronze import BRONZE_TABLE, QUARANTINE_TABLE
from lambdalake.lake.checkpoints import CHECKPOINT_INTERVAL, NO_CHECKPOINT_IN_COMMIT
from lambdalake.settings import Settings
from tests.support.parquet_storage import WRITTEN_AS_INGEST_WRITES, file_storage
from tests.support.streaming_chaos import (
    assert_each_record_once,
    kill_mid_batch,
    produce_in_background,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

EVENTS = 200_000
KILLS = 3


@pytest.mark.chaos
def test_sigkill_three_times_during_a_200k_run(ingest_settings: Settings, spark: SparkSession) -> None:
    settings = ingest_settings
    profile = TrafficProfile(count=EVENTS, rate=5_000, malformed_fraction=0.02,
                             duplicate_fraction=0.02, seed=23)
    production = produce_in_background(settings, profile)
    checkpoints = [Path(settings.checkpoint_path(QUERY_NAME))]
    last_committed: dict[Path, int] = {}
    for _ in range(KILLS):
        start_ingest_process(settings)
        last_committed = kill_mid_batch(ingest_process(settings), checkpoints, last_committed)
        assert ingest_process(settings).pid() is None
    manifest = production.manifest()
    assert manifest.acknowledged == manifest.produced == EVENTS

    start_ingest_process(settings)
    wait_caught_up(settings, timeout=300)

    assert_each_record_once(spark, settings, [manifest])
    # bronze and quarantine are never checkpointed inside a commit (ingest's CheckpointWriter
    # does it beside them), and store timestamps as INT64 microseconds, not Spark's default
    # INT96, and the columns unique per record without a dictionary
    for table in (BRONZE_TABLE, QUARANTINE_TABLE):
        delta = DeltaTable(settings.table_path(table))
        assert (delta.metadata().configuration[CHECKPOINT_INTERVAL]
                == NO_CHECKPOINT_IN_COMMIT)
        assert {file_storage(uri) for uri in delta.file_uris()} == {WRITTEN_AS_INGEST_WRITES}
