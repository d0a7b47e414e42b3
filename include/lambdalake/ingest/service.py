"""The ingest stream as a long-running process of the stack: start, stop, kill, catch-up."""

from __future__ import annotations

import os
import sys
import time

from confluent_kafka import Consumer, TopicPartition

from lambdalake.ingest.stream import QUERY_NAME, read_status, status_path
from lambdalake.orchestration.spark_jobs import job_path
from lambdalake.settings import PROJECT_ROOT, Settings
from lambdalake.stack.process import ManagedProcess, StackError


def ingest_process(settings: Settings) -> ManagedProcess:
    return ManagedProcess(QUERY_NAME, settings.state_dir / "run")


def start_ingest_process(settings: Settings) -> int:
    """Start the ingest job detached with exactly these settings (a no-op if it runs);
    its checkpoint decides where it resumes."""
    return ingest_process(settings).start(
        [sys.executable, str(job_path("ingest"))],
        env={**os.environ, **settings.to_environment()},
        cwd=PROJECT_ROOT,
    )


class IngestService:
    """The ingest stream as a component of the platform (start, stop, health)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.process = ingest_process(settings)

    def start(self, timeout: float = 180.0) -> None:
        from lambdalake.kafka.topics import ensure_topic

        ensure_topic(self.settings.kafka, self.settings.kafka.events_topic)
        if self.process.pid() is None:  # a status left by a crashed run must not count
            status_path(self.settings).unlink(missing_ok=True)
        start_ingest_process(self.settings)
        self.process.wait_until(
            lambda: (read_status(self.settings) or {}).get("active") is True, timeout,
            "the streaming query reports progress",
        )

    def stop(self) -> None:
        self.process.stop(timeout=120, root_first=True)  # the running micro-batch finishes


def topic_end_offsets(settings: Settings) -> dict[str, int]:
    """The events topic's high watermark per partition, straight from Kafka."""
    topic = settings.kafka.events_topic.name
    consumer = Consumer({**settings.kafka.client_config(), "group.id": "lambdalake-lag-probe",
                         "enable.auto.commit": False})
    try:
        metadata = consumer.list_topics(topic, timeout=10)
        ends = {}
        for partition in metadata.topics[topic].partitions:
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
            ends[f"{topic}:{partition}"] = high
        return ends
    finally:
        consumer.close()


def wait_caught_up(settings: Settings, timeout: float = 300.0) -> dict[str, int]:
    """Wait until the ingest job has committed every record now in the topic."""
    target = topic_end_offsets(settings)
    process = ingest_process(settings)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = read_status(settings) or {}
        done = status.get("end_offsets", {})
        if all(done.get(p, 0) >= end for p, end in target.items()):
            return target
        if process.pid() is None:
            raise StackError(f"ingest is not running; see {process.log_file}:\n{process.log_tail()}")
        time.sleep(0.5)
    raise StackError(f"ingest did not catch up with {target} within {timeout:.0f}s")
