
import pytest
from airflow.sdk import Connection
from pydantic import ValidationError

from lambdalake.operations.platform import Platform
from lambdalake.orchestration.spark_connect import (
    ORPHAN_CONF,
    SERVER_CLASS,
    TOKEN_VARIABLE,
    as_airflow_task,
    connection_url,
    server_command,
    server_environment,
)
from lambdalake.settings import BatchSettings
from lambdalake.spark import authenticated, connect_token, redacted
from tests.support.settings_factory import MakeSettings
from tests.support.spark_settings import with_spark_jars


def conf_of(command: list[str]) -> dict[str, str]:
    pairs = [command[i + 1] for i, arg in enumerate(command) if arg == "--conf"]
    return dict(pair.split("=", 1) for pair in pairs)


def test_the_server_is_the_platforms_spark_on_loopback_with_its_own_memory(
    make_settings: MakeSettings,
) -> None:
    """Delta and the jars come from the same factory as every driver, the master is the
    same setting (a standalone cluster runs the batch layer through the server)."""
    settings = with_spark_jars(make_settings(spark={
        "connect_port": 21150, "connect_memory": "5g", "master": "spark://127.0.0.1:7077"}))
    command = server_command(settings)
    assert command[0].endswith("bin/spark-submit")
    assert command[1:3] == ["--class", SERVER_CLASS] and command[-1] == "spark-internal"
    conf = conf_of(command)
    assert conf["spark.connect.grpc.binding.address"] == "127.0.0.1"
    assert conf["spark.connect.grpc.binding.port"] == "21150"
    assert conf["spark.driver.memory"] == "5g"
    assert conf["spark.master"] == "spark://127.0.0.1:7077"
    assert conf["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension"
    assert conf["spark.jars"].endswith("delta-spark_4.2_2.13-4.4.0.jar")


def test_the_server_requires_a_token_it_reads_from_its_environment_and_holds_no_other_secret(
    make_settings: MakeSettings, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Any local user can read a command line, and a client's code runs in the server: the
    token is in its environment only, beside no other credential of the stack."""
    monkeypatch.setenv("LAMBDALAKE_SERVING__API_TOKEN", "api-secret")  # exported by a user
    settings = with_spark_jars(make_settings(
        serving={"api_token": "api-secret"}, postgres={"password": "pg-secret"},
        airflow={"admin_password": "admin-secret"}))
    token = connect_token(settings)
    assert token and connect_token(settings) == token, "generated once, then kept"
    assert (settings.state_dir / "secrets" / "spark-connect-token").stat().st_mode & 0o077 == 0
    environment = server_environment(settings)
    assert environment[TOKEN_VARIABLE] == token
    assert token not in " ".join(server_command(settings))
    leaked = [key for key, value in environment.items()
              if value in ("api-secret", "pg-secret", "admin-secret")]
    assert leaked == []
    assert environment["LAMBDALAKE_LAKE__ROOT"] == settings.lake.root, "the settings all else"
    client_url = authenticated(settings)
    assert client_url == f"sc://localhost:{settings.spark.connect_port}/;token={token}"
    assert redacted(client_url) == f"sc://localhost:{settings.spark.connect_port}/;token=***"
    external = make_settings(spark={"connect_url": "sc://spark.example:443/;token=abc;use_ssl=true"})
    assert connect_token(external) is None and TOKEN_VARIABLE not in server_environment(external)
    assert authenticated(external) == "sc://spark.example:443/;token=abc;use_ssl=true"
    assert redacted(authenticated(external)) == "sc://spark.example:443/;token=***;use_ssl=true"


def test_an_orphaned_operation_is_stopped_before_airflow_may_retry_its_task() -> None:
    """A killed task's query runs on in the server until Spark notices it has no client;
    it must be stopped before the retry starts writing the same slices."""
    seconds = {key: int(value.removesuffix("s")) for key, value in ORPHAN_CONF.items()}
    stopped_within = sum(seconds.values())  # detached timeout + one maintenance interval
    shortest_retry_delay = BatchSettings.model_fields["retry_delay_seconds"].metadata[0].ge
    assert stopped_within < shortest_retry_delay
    with pytest.raises(ValidationError):
        BatchSettings(retry_delay_seconds=stopped_within)


def test_the_platform_lists_the_server_only_when_it_runs_one(
    make_settings: MakeSettings,
) -> None:
    names = [p.name for p in Platform(make_settings()).processes()]
    assert "spark-connect" in names and names.index("spark-connect") < names.index("ingest")
    for spark in ({"batch_tasks": "driver"}, {"connect_url": "sc://spark.example:15002"}):
        platform = Platform(make_settings(spark=spark))
        assert "spark-connect" not in [p.name for p in platform.processes()]


@pytest.mark.parametrize(("uri", "expected"), [
    ("spark-connect://spark-connect:15002", "sc://spark-connect:15002/"),
    ("spark-connect://etl:s3%3Bcr%3Dt@spark.example:443?use_ssl=true",
     "sc://spark.example:443/;user_id=etl;token=s3%3Bcr%3Dt;use_ssl=true"),
])
def test_an_airflow_connection_reads_as_airflows_spark_provider_reads_it(
    uri: str, expected: str,
) -> None:
    assert connection_url(Connection.from_uri(uri, conn_id="spark_connect_default")) == expected


def test_an_airflow_connection_without_a_host_is_refused() -> None:
    with pytest.raises(ValueError, match="not the host"):
        connection_url(Connection(conn_id="c", conn_type="spark_connect", host=""))


def test_the_airflow_connection_wins_over_the_setting_and_stops_the_stacks_own_server(
    make_settings: MakeSettings, monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = make_settings(spark={"connect_conn_id": "batch_spark"})
    assert as_airflow_task(settings) is settings  # no such connection: the settings
    monkeypatch.setenv("AIRFLOW_CONN_BATCH_SPARK", "spark-connect://spark.example:15002")
    in_airflow = as_airflow_task(settings)
    assert in_airflow.spark.connect_remote == "sc://spark.example:15002/"
    assert not in_airflow.spark.runs_connect_server
    driver = make_settings(spark={"connect_conn_id": "batch_spark", "batch_tasks": "driver"})
    assert as_airflow_task(driver) is driver
