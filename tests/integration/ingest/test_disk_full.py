"""The lake's disk fills up under ingest: the stream stops with a clear error and without
committing past what it wrote; once space is freed, a restart writes every record once."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from lambdalake.generator.traffic import Manifest, TrafficGenerator, TrafficProfile, produce_traffic
from lambdalake.ingest.service import ingest_process, start_ingest_process, wait_caught_up
from lambdalake.ingest.status import QUERY_NAME
from lambdalake.kafka.producer import EventProducer
from lambdalake.settings import Settings
from lambdalake.stack.process import StackError
from lambdalake.streaming.progress import consumed_offsets, read_status
from tests.support.streaming_chaos import assert_each_record_once

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

FIRST, SECOND = 20_000, 10_000


@pytest.fixture
def small_lake(ingest_settings: Settings, tmp_path: Path,
               monkeypatch: pytest.MonkeyPatch) -> Iterator[Settings]:
    """Ingest settings whose lake is a 64 MiB file system of its own (a tmpfs)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small file system for the lake needs root")
    mount_point = tmp_path / "small-disk"
    mount_point.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mount_point)],
                   check=True)
    monkeypatch.setenv("LAMBDALAKE_LAKE__ROOT", str(mount_point / "lake"))
    try:
        yield Settings()
    finally:
        ingest_process(ingest_settings).stop(timeout=30)
        subprocess.run(["umount", "--lazy", str(mount_point)], check=False)


def fill(directory: Path) -> Path:
    """A file that takes every free byte of ``directory``'s file system."""
    filler = directory / "filler"
    subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=1M"], capture_output=True,
                   check=False)  # ends with "No space left on device"
    assert os.statvfs(directory).f_bavail == 0
    return filler


def produce(settings: Settings, count: int, seed: int) -> Manifest:
    profile = TrafficProfile(count=count, rate=20_000, malformed_fraction=0.02,
                             duplicate_fraction=0.02, seed=seed)
    manifest = produce_traffic(TrafficGenerator(profile),
                               EventProducer(settings.kafka, settings.kafka.events_topic.name))
    assert manifest.acknowledged == count
    return manifest


@pytest.mark.chaos
def test_a_full_disk_stops_ingest_clearly_and_a_restart_after_freeing_it_loses_nothing(
    small_lake: Settings, spark: SparkSession
) -> None:
    settings = small_lake
    first = produce(settings, FIRST, seed=41)
    start_ingest_process(settings)
    events = f"{settings.kafka.events_topic.name}:"  # the entities' topics are caught up too
    consumed = {partition: offset for partition, offset
                in wait_caught_up(settings, timeout=300).items() if partition.startswith(events)}

    filler = fill(Path(settings.lake.root))
    second = produce(settings, SECOND, seed=42)
    deadline = time.monotonic() + 180
    while ingest_process(settings).pid() is not None:
        assert time.monotonic() < deadline, "ingest kept running on a full disk"
        time.sleep(0.5)
    status = read_status(settings, QUERY_NAME) or {}
    assert status.get("active") is False
    assert "No space left on device" in (status.get("error") or ""), status.get("error")
    assert consumed_offsets(status) == consumed, "ingest committed offsets it did not write"
    with pytest.raises(StackError, match="No space left on device"):
        wait_caught_up(settings, timeout=10)

    filler.unlink()
    start_ingest_process(settings)
    wait_caught_up(settings, timeout=300)
    assert_each_record_once(spark, settings, [first, second])
