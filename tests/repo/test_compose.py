"""docker-compose.yml cannot run here (no Docker engine), so it is checked statically:
the services exist, ports bind to loopback, settings and Airflow config agree with the
local stack, and no credential has a default."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from airflow.sdk import Connection

from lambdalake.ingest.service import IngestService
from lambdalake.kafka.registry_server import LocalSchemaRegistry
from lambdalake.operations.platform import Platform
from lambdalake.orchestration.spark_connect import SparkConnectServer, connection_url
from lambdalake.serving.service import APP_FACTORY, ServingService
from lambdalake.settings import Settings, documented_variables
from lambdalake.speed.service import SpeedLayer
from lambdalake.speed.shards import shards
from lambdalake.stack.airflow import EXECUTOR, KNOWN_WARNINGS, Airflow
from lambdalake.stack.kafka_broker import KafkaCluster
from lambdalake.stack.object_store import LocalObjectStore
from lambdalake.stack.postgres import Postgres
from lambdalake.stack.watchdog import Watchdog
from tests.support.repo import REPO

COMPOSE_SERVICES: dict[type, set[str]] = {
    # each component of the local stack, in Platform's start order: its services in compose
    # (a cluster where the local stack runs one process, and compose's one-shot jobs)
    LocalObjectStore: {"object-store"},
    Postgres: {"postgres"},
    KafkaCluster: {"kafka-1", "kafka-2", "kafka-3"},
    LocalSchemaRegistry: {"schema-registry", "register-contracts"},
    SparkConnectServer: {"spark-master", "spark-worker", "spark-connect"},
    IngestService: {"ingest"},
    SpeedLayer: {"speed-0", "speed-1"},
    ServingService: {"serving-api"},
    # and the receiver of its StatsD metrics (locally, whatever listens on the port)
    Airflow: {"airflow-init", "airflow-api-server", "airflow-scheduler",
              "airflow-dag-processor", "airflow-triggerer", "statsd-exporter"},
    Watchdog: set(),  # compose's own restart policy (below) starts what exited again
}
ONE_SHOT_JOBS = {"register-contracts", "airflow-init"}
REQUIRED_VARIABLE = re.compile(r"^\$\{(\w+):\?[^}]+\}$")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load((REPO / "docker-compose.yml").read_text())


def environment(compose: dict[str, Any], service: str) -> dict[str, str]:
    return {k: str(v) for k, v in compose["services"][service].get("environment", {}).items()}


def substituted(env: dict[str, str]) -> dict[str, str]:
    """What compose would pass, with every required secret set to a placeholder."""
    return {k: re.sub(r"\$\{(\w+):\?[^}]+\}", r"from-\1", v) for k, v in env.items()}


def test_every_component_of_the_platform_is_in_compose_and_nothing_else(
    compose: dict[str, Any], settings: Settings
) -> None:
    """What ``lambdalake up`` starts (``Platform.components``) is what compose runs: a
    component added to the platform fails here until compose has its services."""
    components = Platform(settings).components
    assert [type(component) for component in components] == list(COMPOSE_SERVICES)
    assert set(compose["services"]) == set().union(*COMPOSE_SERVICES.values())


def test_compose_starts_every_service_again_that_exits_but_the_one_shot_jobs(
    compose: dict[str, Any]
) -> None:
    """What the local stack's watchdog does for Airflow, compose does for every service:
    the scheduler exits when PostgreSQL goes away, and nothing else would start it."""
    policies = {name: service.get("restart") for name, service in compose["services"].items()}
    assert {name for name, policy in policies.items() if policy != "unless-stopped"} == (
        ONE_SHOT_JOBS)
    assert all(policies[job] == "no" for job in ONE_SHOT_JOBS)


def test_compose_starts_each_service_after_what_the_platform_starts_before_it(
    compose: dict[str, Any]
) -> None:
    """A service waits only for services of its own component or of one the platform
    starts earlier, so compose and ``lambdalake up`` bring the stack up in one order."""
    position = {service: at for at, services in enumerate(COMPOSE_SERVICES.values())
                for service in services}
    for name, service in compose["services"].items():
        later = [needed for needed in service.get("depends_on", {})
                 if position[needed] > position[name]]
        assert later == [], f"{name} waits for {later}, which the platform starts after it"


def test_published_ports_bind_to_loopback_only(compose: dict[str, Any]) -> None:
    for name, service in compose["services"].items():
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name} publishes {port} beyond loopback"


def test_every_lambdalake_variable_is_a_real_setting(compose: dict[str, Any]) -> None:
    known = {name for name, _, _ in documented_variables()}
    for name in compose["services"]:
        unknown = {k for k in environment(compose, name) if k.startswith("LAMBDALAKE_")} - known
        assert unknown == set(), f"{name}: {unknown} are not settings"


def test_settings_point_at_the_compose_services(
    compose: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in substituted(environment(compose, "airflow-scheduler")).items():
        if key.startswith("LAMBDALAKE_"):
            monkeypatch.setenv(key, value)
    settings = Settings()
    advertised = {environment(compose, f"kafka-{node}")["KAFKA_ADVERTISED_LISTENERS"]
                  .split(",")[0].removeprefix("PLAINTEXT://") for node in (1, 2, 3)}
    assert advertised == set(settings.kafka.bootstrap_servers.split(","))
    postgres_env = environment(compose, "postgres")
    assert settings.postgres.host == "postgres" and settings.postgres.port == 5432
    assert settings.postgres.user == postgres_env["POSTGRES_USER"]
    assert settings.postgres.database == postgres_env["POSTGRES_DB"]
    master = compose["services"]["spark-master"]["command"]
    assert settings.spark.master == f"spark://spark-master:{master[master.index('--port') + 1]}"
    assert settings.spark.master in compose["services"]["spark-worker"]["command"]
    assert compose["services"]["spark-worker"]["deploy"]["replicas"] >= 2
    server_port = environment(compose, "spark-connect")["LAMBDALAKE_SPARK__CONNECT_PORT"]
    connection = environment(compose, "airflow-scheduler")[
        f"AIRFLOW_CONN_{settings.spark.connect_conn_id.upper()}"]
    assert connection_url(Connection.from_uri(connection, conn_id="c")) == (
        f"sc://spark-connect:{server_port}/")
    assert compose["services"]["spark-connect"]["command"] == ["lambdalake", "spark-connect", "run"]
    assert compose["services"]["spark-connect"]["hostname"] == "spark-connect"
    api = compose["services"]["airflow-api-server"]
    assert f"127.0.0.1:{settings.airflow.port}:{settings.airflow.port}" in api["ports"]
    assert str(settings.airflow.port) in api["command"]
    assert settings.environment == "production"  # containers never generate credentials


def test_airflow_is_configured_like_the_local_stack(
    compose: dict[str, Any], monkeypatch: pytest.MonkeyPatch, settings: Settings
) -> None:
    local_keys = {k for k in Airflow(settings).environment() if k.startswith("AIRFLOW__")}
    for name in ("airflow-init", "airflow-api-server", "airflow-scheduler",
                 "airflow-dag-processor", "airflow-triggerer"):
        env = environment(compose, name)
        missing = local_keys - set(env)
        assert missing == set(), f"{name} lacks {missing}"
        assert env["AIRFLOW__CORE__EXECUTOR"] == EXECUTOR, f"{name} runs another executor"
        assert env["PYTHONWARNINGS"] == KNOWN_WARNINGS, name
        conn = substituted(env)["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]
        assert conn == (
            f"postgresql+psycopg2://{env['LAMBDALAKE_POSTGRES__USER']}:from-POSTGRES_PASSWORD@"
            f"{env['LAMBDALAKE_POSTGRES__HOST']}:{env['LAMBDALAKE_POSTGRES__PORT']}/"
            f"{env['LAMBDALAKE_POSTGRES__DATABASE']}"
        )


def test_no_credential_has_a_default(compose: dict[str, Any]) -> None:
    for name in compose["services"]:
        for key, value in environment(compose, name).items():
            if re.search(r"PASSWORD|SECRET|FERNET|TOKEN", key) and not key.endswith("_FILE"):
                assert REQUIRED_VARIABLE.match(value), f"{name}.{key} must come from the environment"
            if "SQL_ALCHEMY_CONN" in key:
                assert "${POSTGRES_PASSWORD:?" in value


AIRFLOW_SERVICES = ("airflow-init", "airflow-api-server", "airflow-scheduler",
                    "airflow-dag-processor", "airflow-triggerer")
AIRFLOW_SECRETS = {"POSTGRES_PASSWORD", "AIRFLOW_ADMIN_PASSWORD", "AIRFLOW_TRIGGER_PASSWORD",
                   "AIRFLOW_FERNET_KEY", "AIRFLOW_API_SECRET_KEY", "AIRFLOW_JWT_SECRET"}


def secrets_of(compose: dict[str, Any], service: str) -> set[str]:
    """The required variables (the secrets) a service's environment names."""
    return {match for value in environment(compose, service).values()
            for match in re.findall(r"\$\{(\w+):\?", value)}


def test_each_service_gets_only_the_secrets_it_uses(
    compose: dict[str, Any], settings: Settings
) -> None:
    """Airflow's and PostgreSQL's secrets reach only Airflow's services (and PostgreSQL its
    own password); the query API's token only the query API; the streams, Spark and the
    object store get the object store's key alone."""
    lake_key = {"OBJECT_STORE_SECRET_KEY"}
    for name in compose["services"]:
        held = secrets_of(compose, name)
        if name in AIRFLOW_SERVICES:
            assert held == AIRFLOW_SECRETS | lake_key, name
        elif name == "serving-api":
            assert held == lake_key | {"SERVING_API_TOKEN"}, name
        elif name == "postgres":
            assert held == {"POSTGRES_PASSWORD"}, name
        else:
            assert held <= lake_key, (name, held)
    users = environment(compose, "airflow-scheduler")["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"]
    assert users == Airflow(settings).environment()["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"]


def test_the_project_code_is_mounted(compose: dict[str, Any]) -> None:
    volumes = compose["services"]["airflow-scheduler"]["volumes"]
    for folder in ("dags", "plugins", "include", "spark_jobs", "schemas"):
        assert f"./{folder}:/opt/lambdalake/{folder}" in volumes


def test_the_streaming_applications_are_services_the_runtime_restarts(
    compose: dict[str, Any]
) -> None:
    ingest = compose["services"]["ingest"]
    assert ingest["command"] == ["python", "/opt/lambdalake/spark_jobs/ingest.py"]
    for app in ("ingest", "speed-0", "speed-1"):
        assert compose["services"][app]["restart"] == "unless-stopped"
    for script in ("ingest", "speed"):
        assert (REPO / "spark_jobs" / f"{script}.py").is_file()
    speed = substituted(environment(compose, "speed-0"))
    assert Settings().speed.process_manager == "stack"  # the local stack's default
    assert speed["LAMBDALAKE_SPEED__PROCESS_MANAGER"] == "container"  # the supervisor only checks
    # as the local stack's ingest.niceness: ingest yields CPU to the speed layer
    assert ingest["cpu_shares"] < compose["services"]["speed-0"].get("cpu_shares", 1024)


def test_one_speed_service_runs_each_shard_and_every_service_knows_how_many(
    compose: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The supervisor (Airflow) and the query API merge the shards' status: they must count
    the same shards the speed services are; each shard has a driver host of its own."""
    (shard_count,) = {environment(compose, name).get("LAMBDALAKE_SPEED__SHARDS")
                      for name in compose["services"]
                      if any(k.startswith("LAMBDALAKE_") for k in environment(compose, name))}
    for key, value in substituted(environment(compose, "airflow-scheduler")).items():
        if key.startswith("LAMBDALAKE_"):
            monkeypatch.setenv(key, value)
    layout = shards(Settings())
    assert len(layout) == int(str(shard_count)) > 1
    for shard in layout:
        service = compose["services"][shard.app]
        assert service["command"] == ["python", "/opt/lambdalake/spark_jobs/speed.py",
                                      "--shard", str(shard.index)]
        assert service["hostname"] == shard.app == environment(compose, shard.app)[
            "LAMBDALAKE_SPARK__DRIVER_HOST"]
    assert not [name for name in compose["services"]
                if name.startswith("speed") and name not in {s.app for s in layout}]


def test_the_query_api_serves_the_shared_lake_on_its_setting_port(
    compose: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    service = compose["services"]["serving-api"]
    for key, value in substituted(environment(compose, "serving-api")).items():
        if key.startswith("LAMBDALAKE_"):
            monkeypatch.setenv(key, value)
    settings = Settings()
    command = service["command"]
    assert command[:3] == ["uvicorn", "--factory", APP_FACTORY]
    assert command[command.index("--port") + 1] == str(settings.serving.port)
    assert command[command.index("--workers") + 1] == str(settings.serving.workers)
    assert f"127.0.0.1:{settings.serving.port}:{settings.serving.port}" in service["ports"]
    assert settings.lake.root == "s3a://lambdalake/lake"  # the object store's bucket


def test_three_brokers_form_one_quorum_and_topics_are_replicated_on_all(
    compose: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    brokers = {name: environment(compose, name) for name in ("kafka-1", "kafka-2", "kafka-3")}
    assert len({env["CLUSTER_ID"] for env in brokers.values()}) == 1
    voters = {f"{env['KAFKA_NODE_ID']}@{name}:9093" for name, env in brokers.items()}
    for name, env in brokers.items():
        assert set(env["KAFKA_CONTROLLER_QUORUM_VOTERS"].split(",")) == voters, name
        assert compose["services"][name]["hostname"] == name
        assert env["KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR"] == "3"
        assert env["KAFKA_TRANSACTION_STATE_LOG_MIN_ISR"] == "2"
    host_ports = [port for name in brokers for port in compose["services"][name]["ports"]]
    assert len(set(host_ports)) == 3  # each broker's host listener on a port of its own
    for key, value in substituted(environment(compose, "ingest")).items():
        if key.startswith("LAMBDALAKE_"):
            monkeypatch.setenv(key, value)
    kafka = Settings().kafka
    for topic in (kafka.events_topic, kafka.entity_topic("product")):
        assert (topic.replication_factor, topic.min_insync_replicas) == (3, 2), topic.name
    assert kafka.events_topic.partitions % len(shards(Settings())) == 0  # shards split evenly
    for name in compose["services"]:  # whatever waits for Kafka waits for the quorum
        waits = set(compose["services"][name].get("depends_on") or ())
        assert not waits & set(brokers) or waits >= set(brokers), name


def test_the_lake_and_checkpoints_are_on_the_object_store_service(
    compose: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    server = compose["services"]["object-store"]
    assert server["command"] == ["lambdalake", "object-store", "run"]
    server_env = substituted(environment(compose, "object-store"))
    assert server_env["LAMBDALAKE_LAKE__OBJECT_STORE__SERVE"] == "true"
    port = server_env["LAMBDALAKE_LAKE__OBJECT_STORE__PORT"]
    assert "object-store-data:/var/lib/lambdalake/object-store" in server["volumes"]
    for key, value in substituted(environment(compose, "ingest")).items():
        if key.startswith("LAMBDALAKE_"):
            monkeypatch.setenv(key, value)
    settings = Settings()
    store = settings.lake.object_store
    assert not store.serve and store.endpoint == f"http://object-store:{port}"
    assert settings.lake.root.startswith(f"s3a://{store.bucket}/")
    assert settings.lake.checkpoint_root.startswith(f"s3a://{store.bucket}/")
    assert store.secret_access_key is not None  # from OBJECT_STORE_SECRET_KEY
    for name in ("ingest", "speed-0", "speed-1", "spark-connect", "spark-worker",
                 "serving-api", "airflow-scheduler"):  # every writer and reader of the lake
        assert compose["services"][name]["depends_on"]["object-store"] == {
            "condition": "service_healthy"}, name
    worker = substituted(environment(compose, "spark-worker"))
    assert worker["AWS_ACCESS_KEY_ID"] == store.access_key_id
    assert worker["AWS_SECRET_ACCESS_KEY"] == "from-OBJECT_STORE_SECRET_KEY"


def test_the_schema_registry_is_configured_like_the_local_stack(
    compose: dict[str, Any], monkeypatch: pytest.MonkeyPatch, settings: Settings
) -> None:
    registry_env = environment(compose, "schema-registry")
    local_keys = {k for k in LocalSchemaRegistry(settings).environment()
                  if k.startswith(("APICURIO_", "QUARKUS_"))}
    assert local_keys == set(registry_env), "compose and the local stack configure it differently"
    for key, value in substituted(environment(compose, "ingest")).items():
        if key.startswith("LAMBDALAKE_"):
            monkeypatch.setenv(key, value)
    settings = Settings()
    assert registry_env["APICURIO_STORAGE_KIND"] == "kafkasql"
    assert registry_env["APICURIO_KAFKASQL_BOOTSTRAP_SERVERS"] == settings.kafka.bootstrap_servers
    assert registry_env["APICURIO_KAFKASQL_TOPIC"] == settings.registry.journal_topic.name
    assert registry_env["APICURIO_RULES_GLOBAL_COMPATIBILITY"] == settings.registry.compatibility
    port = registry_env["QUARKUS_HTTP_PORT"]
    assert settings.registry.client_config()["url"] == (
        f"http://schema-registry:{port}/apis/ccompat/v7")
    assert compose["services"]["register-contracts"]["command"] == [
        "lambdalake", "contracts", "register"]
    for app in ("ingest", "speed-0", "speed-1"):  # nothing reads events before the contracts
        assert compose["services"][app]["depends_on"]["register-contracts"] == {
            "condition": "service_completed_successfully"}


def test_the_image_fetches_jars_and_web_assets_where_the_services_read_them(
    compose: dict[str, Any]
) -> None:
    """The Dockerfile's ``lambdalake setup`` fills the jars and web assets dirs the compose
    services are configured with, the image has the tools setup fetches them with, and setup
    knows the registry runs elsewhere (the image has Java 17, the registry needs 21)."""
    dockerfile = (REPO / "Dockerfile").read_text().replace("\\\n", " ")
    [setup] = [line for line in dockerfile.splitlines() if line.rstrip().endswith("lambdalake setup")]
    built = dict(re.findall(r"(LAMBDALAKE_\w+)=(\S+)", setup))
    services = environment(compose, "airflow-scheduler")
    for variable in ("LAMBDALAKE_JARS_DIR", "LAMBDALAKE_WEB_ASSETS_DIR"):
        assert built[variable] == services[variable] == environment(compose, "serving-api")[
            variable], variable
    # the registry runs from its own image: setup, told so, needs no Java 21 (find_java)
    assert built["LAMBDALAKE_REGISTRY__URL"] == services["LAMBDALAKE_REGISTRY__URL"]
    assert compose["services"]["schema-registry"]["image"].startswith("apicurio/")
    [packages] = re.findall(r"apt-get install -y --no-install-recommends ([^&]+)", dockerfile)
    assert {"maven", "npm"} <= set(packages.split())
