"""The local platform as one unit: start in dependency order, stop in reverse, report."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass

import psutil

from lambdalake.contracts.registry import ContractRegistry
from lambdalake.ingest.service import IngestService
from lambdalake.kafka.registry_server import LocalSchemaRegistry
from lambdalake.kafka.schema_registry import register_contracts, registry_client
from lambdalake.orchestration.spark_connect import SparkConnectServer
from lambdalake.serving.service import ServingService
from lambdalake.settings import Settings
from lambdalake.speed.service import SpeedLayer
from lambdalake.stack.airflow import Airflow
from lambdalake.stack.exposure import refuse_unauthenticated_exposure
from lambdalake.stack.kafka_broker import KafkaCluster
from lambdalake.stack.object_store import LocalObjectStore
from lambdalake.stack.postgres import Postgres
from lambdalake.stack.process import ManagedProcess, StackComponent, stop_processes, stragglers
from lambdalake.stack.secrets import keep_private
from lambdalake.stack.watchdog import Watchdog


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
        self.watchdog = Watchdog(settings)
        self.components: list[StackComponent] = [
            self.object_store, self.postgres, self.kafka, self.registry, self.spark_connect,
            self.ingest, self.speed, self.serving, self.airflow, self.watchdog]
        """The stack in start order (`down` stops it in reverse)."""

    def processes(self) -> list[ManagedProcess]:
        return [process for component in self.components for process in component.processes]

    def up(self, echo: Callable[[str], None] = print) -> float:
        """Start what is not running and wait until all of it is healthy; return seconds.
        First an unauthenticated listener beyond loopback is refused, and the state dir is
        made private (``keep_private``)."""
        started = time.monotonic()
        refuse_unauthenticated_exposure(self.settings)
        keep_private(self.settings.state_dir)
        for component in self.components:
            echo(f"starting {component.label} ...")
            component.start()
            echo(f"  {component.label} healthy after {time.monotonic() - started:.1f}s")
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
        """Stop what ``up`` started (by PID), newest first, then any process of the state
        dir left without a pid file (``stragglers``); return what was running."""
        stopped = []
        for component in reversed(self.components):
            stopped += [process.name for process in component.processes
                        if process.pid() is not None]
            component.stop()
        left = stragglers(self.settings.state_dir)
        described = [f"straggler pid {process.pid} ({_name(process)})" for process in left]
        stop_processes(left)
        return stopped + described

    def clean(self) -> None:
        """Stop everything, then delete all local state (PostgreSQL data wherever it lives)."""
        self.down()
        postgres_link = self.settings.state_dir / "postgres" / "data"
        if postgres_link.is_symlink():
            shutil.rmtree(postgres_link.resolve().parent, ignore_errors=True)
        shutil.rmtree(self.settings.state_dir, ignore_errors=True)

    def status(self) -> list[ProcessStatus]:
        return [ProcessStatus(p.name, p.pid(), p.rss_bytes()) for p in self.processes()]



def _name(process: psutil.Process) -> str:
    try:
        return str(process.name())
    except psutil.NoSuchProcess:
        return "exited"
