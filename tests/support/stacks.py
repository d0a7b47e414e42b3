"""The real components, started once per test session (or reused if already running on the
test ports), and whole stacks for the end-to-end tier: the fixtures the integration and
end-to-end tests share (``tests/conftest.py`` loads them as a plugin)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING

import pytest

from lambdalake.kafka.registry_server import LocalSchemaRegistry
from lambdalake.operations.platform import Platform
from lambdalake.settings import Settings, get_settings
from lambdalake.stack.kafka_broker import KafkaCluster

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def settings() -> Settings:
    """The session's settings (``tests/conftest.py``'s environment), guarded: a test that
    left other settings cached would send every later test to the default ports."""
    settings = get_settings()
    assert str(settings.state_dir) == os.environ["LAMBDALAKE_STATE_DIR"], (
        f"get_settings() returned settings for {settings.state_dir}, not the test "
        "session's: a test left its own cached")
    return settings


@pytest.fixture(scope="session")
def kafka(settings: Settings) -> Iterator[KafkaCluster]:
    """The session's Kafka broker: reused if one answers on the test ports, else started."""
    cluster = KafkaCluster(settings)
    started_here = cluster.live_brokers() == 0
    if started_here:
        cluster.start()
    yield cluster
    if started_here:
        cluster.stop()


@pytest.fixture(scope="session")
def schema_registry(settings: Settings, kafka: KafkaCluster) -> Iterator[LocalSchemaRegistry]:
    """The session's schema registry on the session's Kafka: reused if running, else started."""
    registry = LocalSchemaRegistry(settings)
    started_here = registry.process.pid() is None
    registry.start()
    yield registry
    if started_here:
        registry.stop()


@pytest.fixture(scope="session")
def spark(settings: Settings) -> Iterator[SparkSession]:
    """One SparkSession for the whole test session (Spark is slow to start on 2 cores)."""
    from lambdalake.spark import get_spark

    session = get_spark("tests", settings)
    yield session
    session.stop()
    # Harmless, left as it is: foreachBatch and the object-store test start py4j's callback
    # server, which py4j closes at interpreter exit, after pytest closed the stream of the
    # log handler its INFO records reach ("--- Logging error --- ValueError: I/O operation
    # on closed file" after the summary; every result is reported by then). Shutting it
    # down here instead hung the session's teardown in py4j's quiet_close (CI, 2026-12-02).


@pytest.fixture(scope="session")
def fresh_platform() -> Callable[[dict[str, str]], AbstractContextManager[Platform]]:
    """``with fresh_platform(env) as platform:`` a whole stack for one test module."""
    return _fresh_platform


@contextmanager
def _fresh_platform(environment: dict[str, str]) -> Iterator[Platform]:
    """A whole stack, as `make up` runs it, from empty state with these LAMBDALAKE_* variables
    (exported, so the Airflow CLI and tasks inherit them); stopped afterwards."""
    with pytest.MonkeyPatch.context() as patch:
        for key, value in environment.items():
            patch.setenv(key, value)
        patch.delenv("LAMBDALAKE_KAFKA__BOOTSTRAP_SERVERS", raising=False)
        platform = Platform(Settings())
        platform.clean()  # every run starts from empty state, as on a fresh machine
        platform.up()
        try:
            yield platform
        finally:
            platform.down()
