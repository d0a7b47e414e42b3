"""The SparkSession factory: the one way every job and test gets Spark.

It puts the connector jars that setup resolved (Delta Lake, the Kafka source) on the
classpath, so nothing is downloaded when a job starts, turns on Delta's SQL extensions and
catalog, pins the session time zone to UTC (event time is UTC everywhere), keeps shuffles
small for a 2-core machine, and binds the driver to loopback. The master is a setting:
``local[*]`` by default, ``spark://host:7077`` for a standalone cluster.

Batch tasks take a ``task_session`` instead: by default a session of their own on the
long-running Spark Connect server (``spark.batch_tasks``), so a task costs its queries and
not a driver JVM; two tasks never share temporary views or SQL settings.

>>> spark = get_spark("batch")                     # doctest: +SKIP
>>> spark.range(3).write.format("delta").save(settings.table_path("t"))  # doctest: +SKIP
>>> with task_session("validate", settings) as spark:  # doctest: +SKIP
...     spark.read.format("delta").load(settings.table_path("t")).count()
"""

from __future__ import annotations

import logging
import os
import re
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, ExitStack, contextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlparse

from lambdalake.settings import Settings, get_settings
from lambdalake.stack.jars import spark_jars
from lambdalake.stack.object_store import spark_properties, use_object_store
from lambdalake.stack.process import port_open

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.connect.client.retries import RetryPolicy


HUGE_METHODS_COMPILED = "-XX:-DontCompileHugeMethods"

STREAM_JAVA_OPTIONS = f"{HUGE_METHODS_COMPILED} -XX:+UseParallelGC -XX:MetaspaceSize=256m"
"""The streams' JVMs (ingest, the speed layer) collect garbage with the throughput
collector, not G1 (Java's default), which the Connect server and batch drivers keep.

Measured 2026-11-28 on two cores, each collector's runs interleaved with the other's:

- ingest, ``python -m bench.diagnostics.ingest_profile --records 1200000 --per-batch 200000``, three
  pairs: four sustained 200,000-record batches (2-5 of each run; 0 and 1 warm the JVM up)
  took 25.5-28.9 s with G1 and 20.1-23.5 s with the parallel collector, 18-25 % less in
  every pair (2 GiB heap either way; 4 GiB did not help);
- the speed layer beside ingest, ``bench.harness.speed_runs.freshness`` at 5,000 events/s for 30 s,
  four pairs: the funnel view's p99 from produced to readable in Delta lower in every
  pair (G1 2.57-3.62 s, parallel 2.23-2.97 s) on 4-11 % less CPU; the speed JVM's peak
  resident memory 1.6-2.6 GiB with G1, 1.7-3.0 GiB with the parallel collector.

The two paused about as long (2.3 s each in an ingest pair logged with ``-Xlog:gc``); G1
also ran 24 concurrent marking cycles beside the tasks and pays write barriers on every
store, which is where the difference most likely goes. A full collection of the parallel
collector stops every thread of the JVM at once: ingest's batches are seconds long and
absorb it (seven and eight of 0.22-2.0 s at 400,000-record batches in two 5-minute
runs); the speed JVM collected fully once in each of those runs (279 and 450 ms; funnel
p99 2.76 and 2.08 s). The first of those, and several at every start (23-86 ms each),
were for class metadata: the parallel collector collects fully whenever class
metadata passes a threshold that starts at about 21 MB. ``MetaspaceSize=256m`` starts
it higher, and the 5-minute run with it logged no such collection."""

STREAM_SPARK_CONF: Mapping[str, str] = {
    "spark.driver.defaultJavaOptions": STREAM_JAVA_OPTIONS,
    "spark.executor.defaultJavaOptions": STREAM_JAVA_OPTIONS,
}
"""The streams' Java options; they replace the platform's default ones, so they keep
``HUGE_METHODS_COMPILED``."""

log = logging.getLogger(__name__)


def connect_retry_policy() -> RetryPolicy:
    """How long a task's client retries an unreachable server: about 15 s (5 retries,
    back-off 50 ms to 10 s, a delay the server asks for capped at 10 s too) instead of
    pyspark's 10 minutes, so a dead server fails the task at once (Airflow retries it)
    rather than holding a worker slot."""
    from pyspark.sql.connect.client.retries import DefaultPolicy

    return DefaultPolicy(max_retries=5, max_backoff=10_000, max_server_retry_delay=10_000)


class SparkConnectUnavailable(RuntimeError):
    """No Spark Connect server answered within ``spark.connect_wait_seconds``, or it went
    away while a task used it."""


def spark_conf(
    app_name: str, settings: Settings, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Every Spark property the factory sets, as plain data (tested without a JVM).

    A job's own properties (``extra``: the streams' Java options, the gates' planning) win
    over the deployment's ``spark.extra_conf``, as they do on a task's Connect session
    (``session_conf``); a property set both ways is logged, not dropped silently. They are
    named as a session sets them, so one mapping serves both paths: a Hadoop property (one
    not named ``spark.*``, such as Parquet's writer settings) reaches a driver as
    ``spark.hadoop.<key>``, which Spark hands to Hadoop when it starts. Java
    options a deployment adds go in ``extraJavaOptions``, which Spark appends to the
    ``defaultJavaOptions`` the platform and the streams set."""
    spark = settings.spark
    partitions = str(spark.shuffle_partitions)
    conf = {
        "spark.master": spark.master,
        "spark.app.name": f"{spark.app_name_prefix}-{app_name}",
        "spark.jars": ",".join(str(jar) for jar in spark_jars(settings)),
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": partitions,
        "spark.default.parallelism": partitions,
        "spark.databricks.delta.snapshotPartitions": partitions,
        # streaming drivers read every recent progress report each second (status, batch
        # history); Spark's default keeps 100 per query, all parsed from JSON on each read
        "spark.sql.streaming.numRecentProgressUpdates": "30",
        "spark.driver.memory": spark.driver_memory,
        # Whole-stage code generation compiles a stage into one method; the classification
        # stage's is larger than HotSpot's 8,000-byte limit for JIT compilation, so it ran
        # interpreted (the top of every profile of ingest and speed); measured 33 % less
        # time for classifying 100,000 records with the limit lifted. Default options come
        # before a user's extraJavaOptions, which add to them (and can override the flag)
        "spark.driver.defaultJavaOptions": HUGE_METHODS_COMPILED,
        "spark.executor.defaultJavaOptions": HUGE_METHODS_COMPILED,
        "spark.driver.host": spark.driver_host,
        "spark.driver.bindAddress": spark.driver_host,
        "spark.ui.enabled": str(spark.ui_enabled).lower(),
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.warehouse.dir": str(settings.state_dir / "spark-warehouse"),
        "spark.local.dir": str(settings.state_dir / "spark-tmp"),
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
    }
    conf.update(spark_properties(settings))
    conf.update(spark.extra_conf)
    own = {key if key.startswith("spark.") else f"spark.hadoop.{key}": value
           for key, value in (extra or {}).items()}
    return set_over_extra_conf(conf, own, spark.extra_conf, f"the {app_name} job")


def set_over_extra_conf(conf: dict[str, str], own: Mapping[str, str],
                        extra_conf: Mapping[str, str], owner: str) -> dict[str, str]:
    """``conf`` with ``owner``'s own properties set over it, each one that the deployment's
    ``spark.extra_conf`` sets otherwise logged (an operator's setting that loses should
    say so)."""
    for key, value in own.items():
        if extra_conf.get(key, value) != value:
            log.warning("LAMBDALAKE_SPARK__EXTRA_CONF sets %s=%r; %s sets it to %r, which "
                        "wins", key, extra_conf[key], owner, value)
        conf[key] = value
    return conf


def get_spark(
    app_name: str,
    settings: Settings | None = None,
    extra_conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """Return the process's SparkSession, creating it from settings on first use."""
    from pyspark.sql import SparkSession

    settings = settings or get_settings()
    os.environ.setdefault("SPARK_LOCAL_IP", settings.spark.driver_host)
    use_object_store(settings)  # the driver JVM inherits this process's environment
    (settings.state_dir / "spark-tmp").mkdir(parents=True, exist_ok=True)
    builder = SparkSession.builder
    for key, value in spark_conf(app_name, settings, extra_conf).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session


def session_conf(settings: Settings, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The SQL settings a task sets on its own Connect session, over the server's: UTC, the
    shuffle partitions and the job's own (``extra``). The stack's own server started with
    ``spark.extra_conf``; a property of it that a session sets otherwise is logged."""
    spark = settings.spark
    own = {"spark.sql.session.timeZone": "UTC",
           "spark.sql.shuffle.partitions": str(spark.shuffle_partitions), **(extra or {})}
    server_conf = spark.extra_conf if spark.runs_connect_server else {}
    return set_over_extra_conf({}, own, server_conf, "a task's Connect session")


@contextmanager
def task_session(
    app_name: str,
    settings: Settings | None = None,
    extra_conf: Mapping[str, str] | None = None,
) -> Iterator[SparkSession]:
    """A batch task's SparkSession: its own session on the Spark Connect server (released
    on exit), or, with ``spark.batch_tasks=driver``, the process's own driver.

    An unreachable server is waited for (it may be restarting) up to
    ``spark.connect_wait_seconds``, then ``SparkConnectUnavailable`` fails the task, which
    Airflow retries; a task never falls back to a driver of its own, which would hide a
    broken deployment and double the memory it planned for."""
    settings = settings or get_settings()
    if settings.spark.batch_tasks == "driver":
        yield get_spark(app_name, settings, extra_conf)
        return
    from pyspark.sql import SparkSession

    remote = redacted(settings.spark.connect_remote)  # what messages name: never a token
    wait_for_server(remote, settings.spark.connect_wait_seconds)
    session = SparkSession.builder.remote(authenticated(settings)).create()
    server_alive = True
    try:
        session.client.set_retry_policies([connect_retry_policy()])
        for key, value in session_conf(settings, extra_conf).items():
            session.conf.set(key, value)
        yield session
    except Exception as error:
        server_alive = port_open(*server_address(remote))
        if not server_alive:
            raise SparkConnectUnavailable(
                f"the Spark Connect server at {remote} went away during the task "
                f"({type(error).__name__}); the lambdalake_speed_supervisor DAG starts it "
                "again and Airflow retries the task") from error
        raise
    finally:
        if server_alive:
            try:
                session.stop()  # releases the server-side session: views, cache, settings
            except Exception:  # noqa: BLE001 - must not hide the task's own error
                pass


class SessionOnFirstUse:
    """Stands for the session ``open_session`` opens, and opens it on first use (an
    attribute read), in ``stack``, which closes it. For a step that may need no Spark at
    all: a gate step whose slices were all read with delta-rs costs no session on the
    Connect server (or, with ``spark.batch_tasks=driver``, no driver JVM)."""

    def __init__(self, open_session: Callable[[], AbstractContextManager[SparkSession]],
                 stack: ExitStack) -> None:
        self._open_session = open_session
        self._stack = stack
        self._session: SparkSession | None = None

    def __getattr__(self, name: str) -> Any:
        if self._session is None:
            self._session = self._stack.enter_context(self._open_session())
        return getattr(self._session, name)


CONNECT_TOKEN_SECRET = "spark-connect-token"


def connect_token(settings: Settings) -> str | None:
    """The token the stack's own Connect server requires of its clients (None for an
    external server: its URL or Airflow connection carries what it needs)."""
    from lambdalake.stack.secrets import local_secret

    if not settings.spark.runs_connect_server:
        return None
    return local_secret(settings, CONNECT_TOKEN_SECRET, settings.spark.connect_token)


def authenticated(settings: Settings) -> str:
    """The Connect URL a client opens: with the stack's own server, its token as the URL's
    ``token`` parameter (for the builder only: nothing prints this URL)."""
    remote = settings.spark.connect_remote
    token = connect_token(settings)
    return remote if token is None else f"{remote.rstrip('/')}/;token={quote(token, safe='')}"


def redacted(remote: str) -> str:
    """A Connect URL as it may be shown: its token replaced."""
    return re.sub(r"(;token=)[^;]*", r"\1***", remote)


def server_address(remote: str) -> tuple[str, int]:
    """The host and port of a Spark Connect URL (sc://host:port/;params)."""
    url = urlparse(remote)
    if url.scheme != "sc" or not url.hostname:
        raise ValueError(f"spark.connect_url {remote!r}: expected sc://host:port")
    return url.hostname, url.port or 15002


def wait_for_server(remote: str, timeout: float) -> None:
    """Return once the Connect server at ``remote`` accepts connections."""
    host, port = server_address(remote)
    deadline = time.monotonic() + timeout
    while not port_open(host, port):
        if time.monotonic() >= deadline:
            raise SparkConnectUnavailable(
                f"no Spark Connect server at {host}:{port} after {timeout:.0f}s "
                "(LAMBDALAKE_SPARK__CONNECT_WAIT_SECONDS); the stack's server is started by "
                "`make up` and restarted by the lambdalake_speed_supervisor DAG; see "
                "`make status`")
        time.sleep(1)
