"""The smoke job runs unchanged on a Spark standalone cluster (master + worker on loopback)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator

import pytest

from lambdalake.orchestration.smoke import produce_smoke_events
from lambdalake.orchestration.spark_jobs import job_path
from lambdalake.settings import Settings
from lambdalake.stack.kafka_broker import KafkaCluster
from lambdalake.stack.spark_standalone import SparkStandalone
from lambdalake.streaming.service import topic_end_offsets


@pytest.fixture(scope="module")
def standalone(settings: Settings) -> Iterator[SparkStandalone]:
    cluster = SparkStandalone(settings)
    cluster.start()
    yield cluster
    cluster.stop()


def test_smoke_job_on_a_standalone_cluster(
    standalone: SparkStandalone, kafka: KafkaCluster, settings: Settings
) -> None:
    assert produce_smoke_events(settings, 200) == 200
    smoke = settings.kafka.model_copy(update={"events_topic": settings.kafka.smoke_topic})
    in_topic = sum(topic_end_offsets(settings.model_copy(update={"kafka": smoke})).values())
    env = {**os.environ, "LAMBDALAKE_SPARK__MASTER": standalone.master_url}
    result = subprocess.run(
        [sys.executable, str(job_path("smoke"))], env=env, capture_output=True, text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    summary = re.search(r"smoke: (\d+) rows in Delta for (\d+) Kafka records", result.stdout)
    assert summary, result.stdout[-3000:]
    rows, records = int(summary.group(1)), int(summary.group(2))
    assert rows == records == in_topic  # earlier smoke runs of the session included
    # the executors ran in the worker, not in the driver process
    assert "Asked to launch executor" in standalone.worker.log_tail(500)
