"""The local platform as one unit: start in dependency order, stop in reverse, report."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass

from lambdalake.contracts.registry import ContractRegistry
from lambdalake.ingest.service import IngestService
from lambdalake.kafka.registry_server import LocalSchemaRegistry
from lambdalake.kafka.schema_registry import register_contracts, registry_client
from lambdalake.orchestration.spark_connect import SparkConnectServer
from lambdalake.serving.service import ServingService
from lambdalake.settings import Settings
from lambdalake.speed.service import SpeedLayer
from lambdalake.stack.airflow import Airflow
from lambdalake.stack.kafka_broker import KafkaCluster
from lambdalake.stack.object_store import LocalObjectStore
from lambdalake.stack.postgres import Postgres
from lambdalake.stack.process import ManagedProcess

Component = (LocalObjectStore | Postgres | KafkaCluster | LocalSchemaRegistry
             | SparkConnectServer | IngestService | SpeedLayer | ServingService | Airflow)


@dataclass(frozen=True)
class ProcessStatus:
    name: str
    pid: int | None
    rss_bytes: int

    @property
    def running(self) -> bool:
        return self.pid is not None


class Platform:
    """The object storage (when the lake is on the stack's own), PostgreSQL, Kafka, the
    schema registry, the Spark Connect server of batch tasks, the two streaming
    applications, the query API and Airflow of the local stack."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.object_store = LocalObjectStore(settings)
        self.postgres = Postgres(settings)
        self.kafka = KafkaCluster(settings)
        self.registry = LocalSchemaRegistry(settings)
        self.spark_connect = SparkConnectServer(settings)
        self.airflow = Airflow(settings)
        self.ingest = IngestService(settings)
        self.speed = SpeedLayer(settings)
        self.serving = ServingService(settings)

    def processes(self) -> list[ManagedProcess]:
        return [process for _, processes in self._components() for process in processes]

    def _components(self) -> list[tuple[Component, list[ManagedProcess]]]:
        """Components in start order, each with the processes it owns."""
        return [
            (self.object_store, [self.object_store.process] if self.object_store.runs_here
             else []),
            (self.postgres, [self.postgres.process]),
            (self.kafka, [node.process for node in self.kafka.nodes]),
            (self.registry, [self.registry.process] if self.registry.runs_here else []),
            (self.spark_connect, [self.spark_connect.process]
             if self.settings.spark.runs_connect_server else []),
            (self.ingest, [self.ingest.process]),
            (self.speed, self.speed.processes),
            (self.serving, [self.serving.process]),
            (self.airflow, list(self.airflow.services.values())),
        ]

    def up(self, echo: Callable[[str], None] = print) -> float:
        """Start what is not running and wait until all of it is healthy; return seconds."""
        started = time.monotonic()
        for label, component in (
            ("object storage (the lake)", self.object_store),
            ("PostgreSQL", self.postgres), ("Kafka", self.kafka),
            ("schema registry", self.registry),
            ("Spark Connect server (batch tasks)", self.spark_connect),
            ("ingest stream (Kafka -> bronze)", self.ingest),
            ("speed layer (Kafka -> real-time views)", self.speed),
            ("query API (merged views)", self.serving), ("Airflow", self.airflow),
        ):
            echo(f"starting {label} ...")
            component.start()
            echo(f"  {label} healthy after {time.monotonic() - started:.1f}s")
            if component is self.registry:
                self.register_contracts(echo)
        return time.monotonic() - started

    def register_contracts(self, echo: Callable[[str], None]) -> None:
        """The repository's contracts into the registry (idempotent), before any producer."""
        registered = register_contracts(
            registry_client(self.settings.registry), ContractRegistry(),
            self.settings.kafka.events_topic.name, self.settings.registry.compatibility)
        echo(f"  {len(registered)} contract versions registered "
             f"({self.settings.registry.compatibility})")

    def down(self) -> list[str]:
        """Stop what ``up`` started (by PID), newest first; return what was running."""
        stopped = []
        for component, processes in reversed(self._components()):
            stopped += [process.name for process in processes if process.pid() is not None]
            component.stop()
        return stopped

    def clean(self) -> None:
        """Stop everything, then delete all local state (PostgreSQL data wherever it lives)."""
        self.down()
        postgres_link = self.settings.state_dir / "postgres" / "data"
        if postgres_link.is_symlink():
            shutil.rmtree(postgres_link.resolve().parent, ignore_errors=True)
        shutil.rmtree(self.settings.state_dir, ignore_errors=True)

    def status(self) -> list[ProcessStatus]:
        return [ProcessStatus(p.name, p.pid(), p.rss_bytes()) for p in self.processes()]
