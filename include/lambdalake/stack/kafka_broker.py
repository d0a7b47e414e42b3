"""Apache Kafka in KRaft combined mode, run from the jars that setup fetched from Maven Central.

One node by default; with ``LAMBDALAKE_BROKER__COUNT=3`` three nodes on distinct ports and
log dirs form a cluster on this host (a static controller quorum of all three), so that
replication and the loss of a broker can be tested for real.
"""

from __future__ import annotations

import base64
import functools
import socket
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from lambdalake.settings import Settings
from lambdalake.stack.process import ManagedProcess, StackError, run_checked

LOG4J2_CONFIG = """\
status = warn
appender.stdout.type = Console
appender.stdout.name = STDOUT
appender.stdout.layout.type = PatternLayout
appender.stdout.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.stdout.ref = STDOUT
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.state.name = state.change.logger
logger.state.level = WARN
logger.log.name = kafka.log
logger.log.level = WARN
logger.cleaner.name = kafka.log.LogCleaner
logger.cleaner.level = WARN
"""


@dataclass(frozen=True)
class KafkaNode:
    """One KRaft node (broker + controller) of the local stack."""

    settings: Settings
    index: int

    @property
    def node_id(self) -> int:
        return self.index + 1

    @property
    def home(self) -> Path:
        return self.settings.state_dir / "kafka" / f"node-{self.node_id}"

    @property
    def process(self) -> ManagedProcess:
        return ManagedProcess(f"kafka-{self.node_id}", self.settings.state_dir / "run")

    @property
    def client_address(self) -> str:
        return f"{self.settings.broker.host}:{self.settings.broker.client_port(self.index)}"

    def properties(self) -> dict[str, str]:
        broker = self.settings.broker
        host = broker.host
        replication = str(min(3, broker.count))
        voters = ",".join(
            f"{i + 1}@{host}:{broker.controller_port(i)}" for i in range(broker.count)
        )
        return {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "controller.quorum.voters": voters,
            "listeners": f"PLAINTEXT://{self.client_address},"
            f"CONTROLLER://{host}:{broker.controller_port(self.index)}",
            "advertised.listeners": f"PLAINTEXT://{self.client_address}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.home / "data"),
            "num.partitions": "3",
            "auto.create.topics.enable": "false",
            "offsets.topic.replication.factor": replication,
            "transaction.state.log.replication.factor": replication,
            "transaction.state.log.min.isr": str(min(2, broker.count)),
            "share.coordinator.state.topic.replication.factor": replication,
            "share.coordinator.state.topic.min.isr": str(min(2, broker.count)),
            "group.initial.rebalance.delay.ms": "0",
            "log.segment.bytes": str(256 * 1024 * 1024),
        }

    def write_config(self) -> Path:
        self.home.mkdir(parents=True, exist_ok=True)
        path = self.home / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))
        (self.home / "log4j2.properties").write_text(LOG4J2_CONFIG)
        return path

    def java_command(self, main_class: str, *args: str) -> list[str]:
        jars = self.settings.kafka_jars_dir
        if not any(jars.glob("kafka_*.jar")):
            raise StackError(f"no Kafka jars in {jars}: run `make setup` first")
        return [
            "java",
            "-Xms128m",
            f"-Xmx{self.settings.broker.heap}",
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.home / 'log4j2.properties'}",
            f"-Dkafka.logs.dir={self.home / 'logs'}",
            "-cp",
            f"{jars}/*",
            main_class,
            *args,
        ]

    def format_storage(self, cluster_id: str) -> None:
        """Format the log dir for ``cluster_id``; a no-op if it is formatted already."""
        config = self.write_config()
        if (self.home / "data" / "meta.properties").exists():
            return
        command = self.java_command(
            "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(config),
            "--ignore-formatted",
        )
        run_checked(command, self.process.log_file)

    def start(self) -> None:
        """Start the node unless it runs, once its listener ports are free."""
        if self.process.pid() is None:
            broker = self.settings.broker
            wait_until_bindable(broker.host, [broker.client_port(self.index),
                                              broker.controller_port(self.index)])
        self.process.start(self.java_command("kafka.Kafka", str(self.write_config())))


def wait_until_bindable(host: str, ports: list[int], timeout: float = 30.0) -> None:
    """Wait until a listener could bind each port: a broker that is still shutting down, or
    any other socket, may hold one for a while, and Kafka would exit on it ("Address already
    in use")."""
    deadline = time.monotonic() + timeout
    for port in ports:
        while not _bindable(host, port):
            if time.monotonic() > deadline:
                raise StackError(f"{host}:{port} is still in use after {timeout:.0f}s; "
                                 f"see `ss -tanp | grep :{port}`")
            time.sleep(0.5)


def _bindable(host: str, port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Kafka's listener
        try:
            probe.bind((host, port))
        except OSError:
            return False
        return True


def new_cluster_id() -> str:
    """A random KRaft cluster id. Like Kafka's own ``Uuid.randomUuid``, never one that starts
    with "-": the storage tool's argument parser would read it as an option."""
    while True:
        raw = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not raw.startswith("-"):
            return raw


class KafkaCluster:
    """The local Kafka node(s): format once, start, wait for metadata, stop."""

    label = "Kafka"

    @property
    def processes(self) -> list[ManagedProcess]:
        """One process per node."""
        return [node.process for node in self.nodes]

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.nodes = [KafkaNode(settings, i) for i in range(settings.broker.count)]

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(node.client_address for node in self.nodes)

    def cluster_id(self) -> str:
        """A KRaft cluster id, made once and kept, so restarts find their own log dirs."""
        path = self.settings.state_dir / "kafka" / "cluster-id"
        if not path.exists() or path.read_text().startswith("-"):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(new_cluster_id())
        return path.read_text().strip()

    def start(self, timeout: float = 90.0) -> None:
        cluster_id = self.cluster_id()
        for node in self.nodes:
            node.format_storage(cluster_id)
            node.start()
        for node in self.nodes:
            node.process.wait_until(
                functools.partial(self._lists_every_node, node.client_address),
                timeout,
                f"metadata from {node.client_address} lists {len(self.nodes)} broker(s)",
            )

    def _lists_every_node(self, bootstrap: str) -> bool:
        return self.live_brokers(bootstrap) == len(self.nodes)

    def live_brokers(self, bootstrap: str | None = None) -> int:
        """How many brokers the cluster metadata lists (0 if nothing answers)."""
        from confluent_kafka.admin import AdminClient

        admin = AdminClient(
            {"bootstrap.servers": bootstrap or self.bootstrap_servers, "log_level": 0}
        )
        try:
            return len(admin.list_topics(timeout=2).brokers)
        except Exception:  # noqa: BLE001 - unreachable means no brokers
            return 0

    def stop(self) -> None:
        """Stop every node at once: one by one, the last ones would lose their quorum and
        hang in controlled shutdown."""
        with ThreadPoolExecutor(max_workers=len(self.nodes)) as pool:
            list(pool.map(lambda node: node.process.stop(timeout=60), self.nodes))
