from pathlib import Path

import pytest
from pydantic import ValidationError

from lambdalake.operations.platform import Platform
from lambdalake.orchestration.spark_connect import ORPHAN_CONF, SERVER_CLASS, server_command
from lambdalake.settings import BatchSettings, Settings


def settings_with_jars(tmp_path: Path, **overrides: object) -> Settings:
    jars = tmp_path / "jars" / "spark-connectors"
    jars.mkdir(parents=True)
    (jars / "delta-spark_2.13-4.0.0.jar").touch()
    return Settings(state_dir=tmp_path, **overrides)


def conf_of(command: list[str]) -> dict[str, str]:
    pairs = [command[i + 1] for i, arg in enumerate(command) if arg == "--conf"]
    return dict(pair.split("=", 1) for pair in pairs)


def test_the_server_is_the_platforms_spark_on_loopback_with_its_own_memory(
    tmp_path: Path,
) -> None:
    """Delta and the jars come from the same factory as every driver, the master is the
    same setting (a standalone cluster runs the batch layer through the server)."""
    settings = settings_with_jars(tmp_path, spark={
        "connect_port": 21150, "connect_memory": "5g", "master": "spark://127.0.0.1:7077"})
    command = server_command(settings)
    assert command[0].endswith("bin/spark-submit")
    assert command[1:3] == ["--class", SERVER_CLASS] and command[-1] == "spark-internal"
    conf = conf_of(command)
    assert conf["spark.connect.grpc.binding.address"] == "127.0.0.1"
    assert conf["spark.connect.grpc.binding.port"] == "21150"
    assert conf["spark.driver.memory"] == "5g"
    assert conf["spark.master"] == "spark://127.0.0.1:7077"
    assert conf["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension"
    assert conf["spark.jars"].endswith("delta-spark_2.13-4.0.0.jar")


def test_an_orphaned_operation_is_stopped_before_airflow_may_retry_its_task() -> None:
    """A killed task's query runs on in the server until Spark notices it has no client;
    it must be stopped before the retry starts writing the same slices."""
    seconds = {key: int(value.removesuffix("s")) for key, value in ORPHAN_CONF.items()}
    stopped_within = sum(seconds.values())  # detached timeout + one maintenance interval
    shortest_retry_delay = BatchSettings.model_fields["retry_delay_seconds"].metadata[0].ge
    assert stopped_within < shortest_retry_delay
    with pytest.raises(ValidationError):
        BatchSettings(retry_delay_seconds=stopped_within)


def test_the_platform_lists_the_server_only_when_it_runs_one(tmp_path: Path) -> None:
    names = [p.name for p in Platform(Settings(state_dir=tmp_path)).processes()]
    assert "spark-connect" in names and names.index("spark-connect") < names.index("ingest")
    for spark in ({"batch_tasks": "driver"}, {"connect_url": "sc://spark.example:15002"}):
        platform = Platform(Settings(state_dir=tmp_path, spark=spark))
        assert "spark-connect" not in [p.name for p in platform.processes()]
