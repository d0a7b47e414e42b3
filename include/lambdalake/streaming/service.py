"""A streaming application as a long-running process of the stack: start, stop, health.

Each application (``ingest``, ``speed``) is a Spark driver started from ``spark_jobs/<app>.py``
in its own session, with exactly the caller's settings in its environment. Its checkpoint
decides where it resumes, so starting it again after a crash is all a restart needs.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from lambdalake.orchestration.spark_jobs import job_path
from lambdalake.settings import Settings
from lambdalake.stack.process import ManagedProcess, OneProcessComponent, StackError
from lambdalake.streaming.progress import (
    consumed_offsets,
    failures,
    read_status,
    status_path,
)

if TYPE_CHECKING:
    from confluent_kafka import KafkaError


STREAM_SECRETS = ("kafka.sasl_password", "registry.password",
                  "lake.object_store.secret_access_key")
"""The credentials a streaming application uses (``Settings.child_environment``): not the
query API's token, PostgreSQL's, Airflow's or the Spark Connect server's."""


def app_process(settings: Settings, app: str) -> ManagedProcess:
    return ManagedProcess(app, settings.state_dir / "run")


def start_app_process(settings: Settings, app: str, job: str | None = None,
                      args: Sequence[str] = ()) -> int:
    """Start ``spark_jobs/<job>.py`` (default: ``<app>.py``) with ``args`` detached, as
    process ``app``, with these settings (a no-op if it runs).

    Ingest runs at a lower CPU priority than the speed layer: the speed layer's answers are
    the platform's freshest, while ingest's table feeds an hourly batch layer and its input
    waits safely in Kafka."""
    return app_process(settings, app).start(
        [sys.executable, str(job_path(job or app)), *args],
        env=settings.child_environment(STREAM_SECRETS),
        cwd=settings.project_path(),
        niceness=settings.ingest.niceness if app == "ingest" else 0,
    )


class StreamingService(OneProcessComponent):
    """One streaming application as a component of the platform: ``spark_jobs/<job>.py``
    (default: ``<app>.py``) run with ``args`` as process ``app``."""

    def __init__(self, settings: Settings, app: str, job: str | None = None,
                 args: Sequence[str] = ()) -> None:
        self.settings = settings
        self.app = app
        self.job = job
        self.args = list(args)
        self.process = app_process(settings, app)
        self.label = app


    def start(self, timeout: float = 180.0) -> int:
        """Start unless running; wait until every query reports progress; return the pid."""
        pid = self.launch()
        self.wait_ready(timeout)
        return pid

    def launch(self) -> int:
        """Start unless running, without waiting for it; return the pid."""
        from lambdalake.kafka.topics import ensure_platform_topics

        ensure_platform_topics(self.settings.kafka)
        if self.process.pid() is None:  # a status left by a crashed run must not count
            status_path(self.settings, self.app).unlink(missing_ok=True)
        return start_app_process(self.settings, self.app, self.job, self.args)

    def wait_ready(self, timeout: float) -> None:
        """Wait until every query of the running application reports progress."""
        self.process.wait_until(
            lambda: (read_status(self.settings, self.app) or {}).get("active") is True, timeout,
            "its streaming queries report progress",
        )

    def ensure_running(self, name: str, timeout: float = 300.0) -> str:
        """Start the application unless it runs (it resumes from its checkpoints); say what
        was done, and why it was down when its status says."""
        pid = self.process.pid()
        if pid is not None:
            return f"{name} running (pid {pid})"
        left = read_status(self.settings, self.app) or {}
        failed = failures(left)
        pid = self.start(timeout=timeout)
        if failed:
            how = f"restarted from its checkpoints after a failure ({'; '.join(failed)})"
        elif left.get("active") is True:
            how = "restarted after a crash, from its checkpoints"
        else:
            how = "started"
        return f"{name} {how} (pid {pid})"

    def stop(self) -> bool:
        """Stop gracefully: the running micro-batches finish; True if it was running."""
        return self.process.stop(timeout=120, root_first=True)


def topic_end_offsets(settings: Settings, settle_seconds: float = 60.0,
                      topics: list[str] | None = None) -> dict[str, int]:
    """The high watermark per partition of ``topics`` (default: the events topic), straight
    from Kafka.

    Right after a broker restart a partition may have no leader for a few seconds; the
    probe asks again until ``settle_seconds`` passed, then lets the error through.
    """
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer({**settings.kafka.client_config(), "group.id": "lambdalake-lag-probe",
                         "enable.auto.commit": False})
    deadline = time.monotonic() + settle_seconds
    try:
        while True:
            try:
                return {f"{topic}:{partition}": consumer.get_watermark_offsets(
                            TopicPartition(topic, partition), timeout=10)[1]
                        for topic in topics or [settings.kafka.events_topic.name]
                        for partition in consumer.list_topics(topic, timeout=10)
                        .topics[topic].partitions}
            except KafkaException as error:
                if not is_transient(error.args[0]) or time.monotonic() > deadline:
                    raise
                time.sleep(1)
    finally:
        consumer.close()


def is_transient(error: KafkaError) -> bool:
    """An error that a cluster settling after a restart or leader election clears."""
    from confluent_kafka import KafkaError

    return error.retriable() or error.code() in {
        KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN}


def wait_caught_up(
    settings: Settings, app: str, timeout: float = 300.0, topics: list[str] | None = None,
    consumed: Callable[[dict[str, Any]], dict[str, int]] = consumed_offsets,
    partitions: set[int] | None = None,
) -> dict[str, int]:
    """Wait until ``app`` has committed every record now in ``topics`` (default: the events
    topic; by every query of it; only in ``partitions``, if given), as ``consumed`` reads
    its status document."""
    target = {key: end for key, end in topic_end_offsets(settings, topics=topics).items()
              if partitions is None or int(key.rsplit(":", 1)[1]) in partitions}
    process = app_process(settings, app)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = read_status(settings, app) or {}
        done = consumed(status)
        if all(done.get(p, 0) >= end for p, end in target.items()):
            return target
        if process.pid() is None:
            errors = "; ".join(failures(status)) or "no failure recorded"
            raise StackError(f"{app} is not running ({errors}); see {process.log_file}:\n"
                             f"{process.log_tail()}")
        time.sleep(0.5)
    raise StackError(f"{app} did not catch up with {target} within {timeout:.0f}s")
