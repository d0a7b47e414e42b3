"""The local platform as one unit: start in dependency order, stop in reverse, report."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from lambdalake.settings import Settings
from lambdalake.stack.airflow import Airflow
from lambdalake.stack.kafka_broker import KafkaCluster
from lambdalake.stack.postgres import Postgres
from lambdalake.stack.process import ManagedProcess


@dataclass(frozen=True)
class ProcessStatus:
    name: str
    pid: int | None
    rss_bytes: int

    @property
    def running(self) -> bool:
        return self.pid is not None


class Platform:
    """PostgreSQL, Kafka and Airflow of the local stack."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.postgres = Postgres(settings)
        self.kafka = KafkaCluster(settings)
        self.airflow = Airflow(settings)

    def processes(self) -> list[ManagedProcess]:
        return [
            self.postgres.process,
            *(node.process for node in self.kafka.nodes),
            *self.airflow.services.values(),
        ]

    def up(self, echo: Callable[[str], None] = print) -> float:
        """Start what is not running and wait until all of it is healthy; return seconds."""
        started = time.monotonic()
        for label, component in (
            ("PostgreSQL", self.postgres), ("Kafka", self.kafka), ("Airflow", self.airflow),
        ):
            echo(f"starting {label} ...")
            component.start()
            echo(f"  {label} healthy after {time.monotonic() - started:.1f}s")
        return time.monotonic() - started

    def down(self) -> list[str]:
        """Stop what ``up`` started (by PID), newest first; return what was running."""
        stopped = []
        for process in reversed(self.processes()):
            if process.stop(timeout=60):
                stopped.append(process.name)
        return stopped

    def status(self) -> list[ProcessStatus]:
        return [ProcessStatus(p.name, p.pid(), p.rss_bytes()) for p in self.processes()]
