"""The stack's schema registry: Apicurio Registry, run from the distribution setup fetched.

Apicurio serves the Confluent-compatible API (``/apis/ccompat/v7``) that confluent-kafka's
clients speak, so the platform's code talks to "a schema registry", never to Apicurio. It
needs Java 21 or newer (Spark and Kafka stay on the default Java 17). Its storage is
KafkaSQL: every change is a record in a journal topic on the platform's own Kafka, which
the registry replays at start. That makes the schemas as durable and as replicated as the
events they describe (the same choice as Confluent's ``_schemas`` topic), needs no
database of its own, and lets a second registry on the same topic serve the same schemas.
The journal is created here with one partition, kept forever and never compacted.
"""

from __future__ import annotations

import json
import os
import re
import urllib.request
from pathlib import Path

from lambdalake.kafka.topics import ensure_topic
from lambdalake.stack.process import OneProcessComponent, StackError

MINIMUM_JAVA = 21
JVM_DIRS = Path("/usr/lib/jvm")
_JAVA_VERSION = re.compile(r'^JAVA_VERSION="(?P<major>\d+)', re.MULTILINE)


def java_major_version(home: Path) -> int | None:
    """The feature version of the JDK/JRE at ``home`` (from its ``release`` file)."""
    try:
        match = _JAVA_VERSION.search((home / "release").read_text())
    except OSError:
        return None
    return int(match["major"]) if match and (home / "bin" / "java").exists() else None


def find_java(configured: Path | None) -> Path:
    """The ``java`` the registry runs on: the configured home, else the newest Java 21+
    among JAVA_HOME and /usr/lib/jvm/*; a clear error if there is none."""
    if configured is not None:
        version = java_major_version(configured)
        if version is None or version < MINIMUM_JAVA:
            raise StackError(f"LAMBDALAKE_REGISTRY__JAVA_HOME={configured} is not a Java "
                             f"{MINIMUM_JAVA}+ home (found version {version})")
        return configured / "bin" / "java"
    candidates = [Path(os.environ["JAVA_HOME"])] if os.environ.get("JAVA_HOME") else []
    candidates += sorted(JVM_DIRS.glob("*")) if JVM_DIRS.is_dir() else []
    versions = {home: java_major_version(home) or 0 for home in candidates}
    usable = [home for home, version in versions.items() if version >= MINIMUM_JAVA]
    if not usable:
        raise StackError(
            f"the schema registry needs Java {MINIMUM_JAVA} or newer; found "
            f"{sorted(set(versions.values())) or 'none'} in JAVA_HOME and {JVM_DIRS}: install "
            f"one (e.g. apt install openjdk-21-jre-headless) or set LAMBDALAKE_REGISTRY__JAVA_HOME")
    return max(usable, key=lambda home: versions[home]) / "bin" / "java"


class LocalSchemaRegistry(OneProcessComponent):
    """Start (after Kafka), health-check and stop the stack's Apicurio Registry."""

    label = "schema registry"
    process_name = "schema-registry"

    @property
    def runs_here(self) -> bool:
        """False when ``registry.url`` names a registry run elsewhere."""
        return not self.settings.registry.url

    def distribution(self) -> Path:
        assert self.settings.jars_dir is not None
        found = sorted((self.settings.jars_dir / "schema-registry").glob("*/quarkus-run.jar"))
        if not found:
            raise StackError(f"no Apicurio Registry in {self.settings.jars_dir}/schema-registry:"
                             " run `make setup` first")
        return found[-1].parent

    def environment(self) -> dict[str, str]:
        registry = self.settings.registry
        home = self.settings.state_dir / "schema-registry"
        return {
            **os.environ,
            "APICURIO_STORAGE_KIND": "kafkasql",
            "APICURIO_KAFKASQL_BOOTSTRAP_SERVERS": self.settings.kafka.bootstrap_servers,
            "APICURIO_KAFKASQL_TOPIC": registry.journal_topic.name,
            "APICURIO_KAFKASQL_SNAPSHOTS_TOPIC": f"{registry.journal_topic.name}-snapshots",
            "APICURIO_STORAGE_SNAPSHOT_LOCATION": str(home / "snapshots"),
            "APICURIO_RULES_GLOBAL_COMPATIBILITY": registry.compatibility,
            "QUARKUS_HTTP_HOST": registry.host,
            "QUARKUS_HTTP_PORT": str(registry.port),
            "QUARKUS_MANAGEMENT_HOST": registry.host,
            "QUARKUS_MANAGEMENT_PORT": str(registry.management_port),
            "APICURIO_KAFKASQL_CONSUMER_POLL_TIMEOUT": "500",
            "QUARKUS_LOG_CATEGORY__ORG_APACHE_KAFKA__LEVEL": "WARN",
        }

    def command(self) -> list[str]:
        tmp = self.settings.state_dir / "schema-registry" / "tmp"
        return [str(find_java(self.settings.registry.java_home)), "-Xms64m",
                f"-Xmx{self.settings.registry.heap}", f"-Djava.io.tmpdir={tmp}",
                "-jar", str(self.distribution() / "quarkus-run.jar")]

    def healthy(self) -> bool:
        """The management interface reports the registry ready (its storage replayed)."""
        registry = self.settings.registry
        url = f"http://{registry.host}:{registry.management_port}/health/ready"
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(json.load(response).get("status") == "UP")

    def start(self, timeout: float = 120.0) -> str:
        """Start unless running (or run elsewhere); wait until it is ready; say what was done."""
        if not self.runs_here:
            return f"schema registry not run here (registry.url={self.settings.registry.url})"
        if self.process.pid() is not None:
            self.process.wait_until(self.healthy, timeout, "it reports ready")
            return f"schema registry running (pid {self.process.pid()})"
        ensure_topic(self.settings.kafka, self.settings.registry.journal_topic)
        (self.settings.state_dir / "schema-registry" / "tmp").mkdir(parents=True, exist_ok=True)
        pid = self.process.start(self.command(), env=self.environment(),
                                 cwd=self.distribution())
        self.process.wait_until(self.healthy, timeout, "it reports ready")
        return f"schema registry started (pid {pid}) on {self.settings.registry.local_url}"

    def stop(self) -> bool:
        return self.process.stop(timeout=30)
