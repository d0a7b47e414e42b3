import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from types import SimpleNamespace

import pytest

from lambdalake.settings import Settings
from lambdalake.spark import (
    SessionOnFirstUse,
    SparkConnectUnavailable,
    session_conf,
    spark_conf,
    wait_for_server,
)
from tests.support.settings_factory import MakeSettings
from tests.support.spark_settings import with_spark_jars


def test_delta_is_wired_and_time_is_utc(settings: Settings) -> None:
    conf = spark_conf("batch", with_spark_jars(settings))
    assert conf["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension"
    assert conf["spark.sql.catalog.spark_catalog"].endswith("DeltaCatalog")
    assert conf["spark.sql.session.timeZone"] == "UTC"
    assert conf["spark.jars"].endswith("delta-spark_4.2_2.13-4.4.0.jar")
    assert conf["spark.app.name"] == "lambdalake-batch"


def test_master_and_tuning_come_from_settings(make_settings: MakeSettings) -> None:
    settings = with_spark_jars(make_settings(
        spark={"master": "spark://127.0.0.1:7077", "shuffle_partitions": 8,
               "extra_conf": {"spark.executor.memory": "1g"}},
    ))
    conf = spark_conf("speed", settings, {"spark.sql.shuffle.partitions": "3"})
    assert conf["spark.master"] == "spark://127.0.0.1:7077"
    assert conf["spark.databricks.delta.snapshotPartitions"] == "8"
    assert conf["spark.executor.memory"] == "1g"
    assert conf["spark.sql.shuffle.partitions"] == "3"  # per-job overrides win
    assert conf["spark.ui.enabled"] == "false"


def test_a_jobs_own_property_wins_over_extra_conf_and_the_conflict_is_logged(
    make_settings: MakeSettings, caplog: pytest.LogCaptureFixture,
) -> None:
    """As on a Connect session, where a task sets its own SQL settings over the server's."""
    settings = with_spark_jars(make_settings(spark={"extra_conf": {
        "spark.sql.adaptive.enabled": "true", "spark.executor.memory": "1g"}}))
    with caplog.at_level("WARNING", logger="lambdalake.spark"):
        conf = spark_conf("gates", settings, {"spark.sql.adaptive.enabled": "false",
                                              "spark.executor.memory": "1g"})
    assert conf["spark.sql.adaptive.enabled"] == "false"
    assert [record.getMessage() for record in caplog.records] == [
        "LAMBDALAKE_SPARK__EXTRA_CONF sets spark.sql.adaptive.enabled='true'; the gates job "
        "sets it to 'false', which wins"]  # the same value set twice is no conflict


def test_huge_generated_methods_are_jit_compiled_whatever_java_options_are_added(
    make_settings: MakeSettings,
) -> None:
    """The classification stage's generated method is larger than HotSpot's limit for JIT
    compilation; without the flag it runs interpreted, in the driver and executors alike.
    A user's own extraJavaOptions come after it instead of replacing it."""
    settings = with_spark_jars(make_settings(
        spark={"extra_conf": {"spark.driver.extraJavaOptions": "-Xss4m"}}))
    conf = spark_conf("speed", settings)
    assert conf["spark.driver.defaultJavaOptions"] == "-XX:-DontCompileHugeMethods"
    assert conf["spark.executor.defaultJavaOptions"] == "-XX:-DontCompileHugeMethods"
    assert conf["spark.driver.extraJavaOptions"] == "-Xss4m"


def test_a_task_session_sets_only_sql_settings_on_its_connect_session(
    make_settings: MakeSettings,
) -> None:
    """The server has the static properties; a task's session gets UTC, the shuffle
    partitions and the job's own SQL settings, which win."""
    settings = make_settings(spark={"shuffle_partitions": 3})
    conf = session_conf(settings, {"spark.sql.adaptive.enabled": "false",
                                   "spark.sql.shuffle.partitions": "1"})
    assert conf == {"spark.sql.session.timeZone": "UTC", "spark.sql.shuffle.partitions": "1",
                    "spark.sql.adaptive.enabled": "false"}


def test_a_jobs_hadoop_settings_reach_a_driver_through_spark_hadoop(
    make_settings: MakeSettings,
) -> None:
    """A job names its settings as a session sets them. Parquet's writer settings are
    Hadoop properties: a session copies its settings into the Hadoop configuration of its
    writes, by their own names; a driver takes them at its start as ``spark.hadoop.<key>``
    and ignores a name that is not Spark's."""
    own = {"parquet.enable.dictionary#raw_value": "false",
           "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS"}
    conf = spark_conf("compact-bronze", with_spark_jars(make_settings()), own)
    assert conf["spark.hadoop.parquet.enable.dictionary#raw_value"] == "false"
    assert conf["spark.sql.parquet.outputTimestampType"] == "TIMESTAMP_MICROS"
    assert "parquet.enable.dictionary#raw_value" not in conf
    assert session_conf(make_settings(), own).items() >= own.items()


def test_a_task_session_over_the_stacks_own_server_logs_the_extra_conf_it_overrides(
    make_settings: MakeSettings, caplog: pytest.LogCaptureFixture,
) -> None:
    """The stack's server started with extra_conf; an external server never saw it."""
    extra_conf = {"spark.sql.shuffle.partitions": "8", "spark.sql.adaptive.enabled": "true"}
    gates = {"spark.sql.adaptive.enabled": "false"}
    with caplog.at_level("WARNING", logger="lambdalake.spark"):
        conf = session_conf(make_settings(spark={"extra_conf": extra_conf}), gates)
        session_conf(make_settings(spark={
            "extra_conf": extra_conf, "connect_url": "sc://spark.example:443"}), gates)
    assert conf["spark.sql.shuffle.partitions"] == "4"
    assert conf["spark.sql.adaptive.enabled"] == "false"
    assert [record.getMessage().split(";")[0] for record in caplog.records] == [
        "LAMBDALAKE_SPARK__EXTRA_CONF sets spark.sql.shuffle.partitions='8'",
        "LAMBDALAKE_SPARK__EXTRA_CONF sets spark.sql.adaptive.enabled='true'"]


def test_the_stack_runs_its_own_connect_server_unless_one_is_given_or_tasks_use_drivers(
    make_settings: MakeSettings,
) -> None:
    own = make_settings(spark={"connect_port": 21150}).spark
    assert own.runs_connect_server and own.connect_remote == "sc://localhost:21150"
    external = make_settings(spark={"connect_url": "sc://spark.example:443/;use_ssl=true"}).spark
    assert not external.runs_connect_server
    assert external.connect_remote == "sc://spark.example:443/;use_ssl=true"
    assert not make_settings(spark={"batch_tasks": "driver"}).spark.runs_connect_server


def test_a_task_fails_clearly_when_no_connect_server_answers_in_time() -> None:
    with socket.socket() as unused:  # a port nothing listens on
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(SparkConnectUnavailable, match=f"127.0.0.1:{port} after 1s"):
        wait_for_server(f"sc://127.0.0.1:{port}", timeout=1)
    assert 1 <= time.monotonic() - started < 5
    with pytest.raises(ValueError, match="expected sc://host:port"):
        wait_for_server("http://127.0.0.1:15002", timeout=1)


def test_a_session_on_first_use_opens_once_when_used_and_closes_with_its_stack() -> None:
    events: list[str] = []

    @contextmanager
    def session() -> Iterator[SimpleNamespace]:
        events.append("opened")
        yield SimpleNamespace(read="a reader")
        events.append("closed")

    with ExitStack() as stack:
        SessionOnFirstUse(session, stack)
    assert events == []

    with ExitStack() as stack:
        used = SessionOnFirstUse(session, stack)
        assert (used.read, used.read) == ("a reader", "a reader")
        assert events == ["opened"]
    assert events == ["opened", "closed"]
