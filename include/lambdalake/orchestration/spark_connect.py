"""The long-running Spark Connect server that batch tasks are clients of.

Spark ships the server (``spark-connect`` in the pyspark wheel); it runs here as one Spark
driver with the platform's own configuration (``lambdalake.spark.spark_conf``: the Delta
and Kafka jars, Delta's SQL extension, UTC, the master setting), so its queries run in
``local[*]`` or on a standalone cluster exactly as a task's own driver would. A batch task
then costs its queries, not a JVM start. Bound to loopback like every stack process.

The stack starts it when ``spark.batch_tasks`` is ``connect`` and no external server is
set; the speed supervisor DAG starts it again after a crash. An external server is named by
``spark.connect_url`` or, for Airflow's tasks, by the Airflow connection
``spark.connect_conn_id`` (type ``spark_connect``, read as Airflow's Spark provider reads
it), which wins when it is defined: a deployment points its tasks at a remote server from
Airflow's connections, e.g. ``AIRFLOW_CONN_SPARK_CONNECT_DEFAULT=spark-connect://host:15002``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote, urlparse

from lambdalake.settings import Settings
from lambdalake.spark import connect_token, server_address, spark_conf
from lambdalake.stack import object_store
from lambdalake.stack.process import OneProcessComponent, port_open

if TYPE_CHECKING:
    from airflow.sdk import Connection

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
TOKEN_VARIABLE = "SPARK_CONNECT_AUTHENTICATE_TOKEN"
"""Where the server reads the token it requires (``spark.connect.authenticate.token``)."""
ORPHAN_CONF = {
    # A task killed mid-query leaves its operation running on the server, detached from
    # any client. Spark interrupts a detached operation after this timeout (5 min by
    # default), checked at this interval: an orphaned write is stopped well before Airflow
    # retries the task (batch.retry_delay_seconds, at least 20 s), so it never lands after
    # the retry's own write.
    "spark.connect.execute.manager.detachedTimeout": "10s",
    "spark.connect.execute.manager.maintenanceInterval": "5s",
}


def server_command(settings: Settings) -> list[str]:
    """``spark-submit`` of the Connect server with every property of the platform's Spark."""
    import pyspark

    spark = settings.spark
    conf = spark_conf("connect", settings, {
        "spark.driver.memory": spark.connect_memory,
        "spark.connect.grpc.binding.address": spark.driver_host,
        "spark.connect.grpc.binding.port": str(spark.connect_port),
        "spark.log.level": "WARN",  # as every driver of the platform
        **ORPHAN_CONF,
    })
    command = [str(Path(pyspark.__file__).parent / "bin" / "spark-submit"),
               "--class", SERVER_CLASS]
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    return [*command, "spark-internal"]


def server_environment(settings: Settings) -> dict[str, str]:
    """The server JVM's environment: the settings without any credential, the object
    storage's (s3a reads them from the ``AWS_*`` variables), and the token it requires of
    its clients (read from the environment, not its command line, which every local user
    can see). The API token, the database's and Airflow's passwords stay out of it: a
    client's code runs in it."""
    lake = object_store.environment(settings) if settings.lake.on_object_storage else {}
    token = connect_token(settings)
    return {**settings.child_environment(secrets=False), **lake,
            "SPARK_LOCAL_IP": settings.spark.driver_host,
            **({} if token is None else {TOKEN_VARIABLE: token})}


class SparkConnectServer(OneProcessComponent):
    """The stack's Spark Connect server as a component: start, stop, health."""

    label = "Spark Connect server (batch tasks)"
    process_name = "spark-connect"

    @property
    def runs_here(self) -> bool:
        """False when batch tasks run their own drivers or use an external server."""
        return self.settings.spark.runs_connect_server

    def healthy(self) -> bool:
        spark = self.settings.spark
        return self.process.pid() is not None and port_open(
            spark.driver_host, spark.connect_port)

    def start(self, timeout: float = 180.0) -> str:
        """Start unless running (a no-op when batch tasks use their own drivers or an
        external server); wait until it accepts connections; say what was done."""
        if not self.settings.spark.runs_connect_server:
            return "Spark Connect server not run here (spark.batch_tasks / connect_url)"
        if self.healthy():
            return f"Spark Connect server running (pid {self.process.pid()})"
        (self.settings.state_dir / "spark-tmp").mkdir(parents=True, exist_ok=True)
        pid = self.process.start(server_command(self.settings),
                                 env=server_environment(self.settings))
        self.process.wait_until(self.healthy, timeout, "it accepts Spark Connect sessions")
        return f"Spark Connect server started (pid {pid}) on {self.settings.spark.connect_remote}"

    def stop(self) -> bool:
        """Stop it; running sessions fail (their tasks are retried); True if it ran."""
        return self.process.stop(timeout=60)


def connection_url(connection: Connection) -> str:
    """The ``sc://`` URL of an Airflow connection of type ``spark_connect``, built as Airflow's
    Spark provider builds it: host (``sc://`` optional) and port; login as ``user_id``,
    password as ``token``, extra ``use_ssl``."""
    host = connection.host or ""
    url = urlparse(host if "://" in host else f"sc://{host}")
    if not url.hostname or url.path not in ("", "/"):
        raise ValueError(f"Airflow connection {connection.conn_id!r}: host {host!r} is not "
                         "the host[:port] of a Spark Connect server")
    netloc = f"{url.netloc}:{connection.port}" if connection.port else url.netloc
    params = [f"{name}={quote(str(value))}" for name, value in (
        ("user_id", connection.login), ("token", connection.password),
        ("use_ssl", connection.extra_dejson.get("use_ssl"))) if value not in (None, "")]
    remote = f"sc://{netloc}/" + (";" + ";".join(params) if params else "")
    server_address(remote)  # the same check as spark.connect_url's
    return remote


def airflow_connect_url(settings: Settings) -> str | None:
    """The server of Airflow connection ``spark.connect_conn_id``; None if it is not defined."""
    from airflow.sdk import BaseHook
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        connection = BaseHook.get_connection(settings.spark.connect_conn_id)
    except AirflowNotFoundException:
        return None
    return connection_url(connection)


def as_airflow_task(settings: Settings) -> Settings:
    """The settings as Airflow's batch tasks see them: the server of the Airflow connection,
    when it is defined, in place of ``spark.connect_url``."""
    if settings.spark.batch_tasks != "connect" or not (url := airflow_connect_url(settings)):
        return settings
    spark = settings.spark.model_copy(update={"connect_url": url})
    return settings.model_copy(update={"spark": spark})
