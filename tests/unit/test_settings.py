from pathlib import Path

import pytest
from pydantic import ValidationError

from lambdalake.settings import Settings, isolated_environment


def test_paths_default_under_the_state_dir(tmp_path: Path) -> None:
    settings = Settings(state_dir=tmp_path)
    assert settings.jars_dir == tmp_path / "jars"
    assert settings.lake.root == str(tmp_path / "lake")
    assert settings.table_path("bronze") == f"{tmp_path}/lake/bronze"
    assert settings.checkpoint_path("ingest") == f"{tmp_path}/checkpoints/ingest"


def test_environment_overrides_nested_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAMBDALAKE_SPARK__MASTER", "spark://10.0.0.5:7077")
    monkeypatch.setenv("LAMBDALAKE_LAKE__ROOT", "s3a://bucket/lake")
    monkeypatch.setenv("LAMBDALAKE_SPARK__EXTRA_CONF", '{"spark.executor.memory": "4g"}')
    settings = Settings()
    assert settings.spark.master == "spark://10.0.0.5:7077"
    assert settings.table_path("bronze") == "s3a://bucket/lake/bronze"
    assert settings.spark.extra_conf == {"spark.executor.memory": "4g"}


def test_overriding_one_key_of_a_topic_keeps_the_rest_of_that_topic_s_defaults(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LAMBDALAKE_KAFKA__REFERENCE_TOPIC__NAME", "acme.reference")
    monkeypatch.setenv("LAMBDALAKE_REGISTRY__JOURNAL_TOPIC__NAME", "acme.schemas")
    settings = Settings()
    product = settings.kafka.entity_topic("product")
    assert product.name == "acme.reference.product"
    assert (product.cleanup_policy, product.retention_ms) == ("compact", -1)
    assert product.min_compaction_lag_ms == 600_000
    journal = settings.registry.journal_topic
    assert (journal.name, journal.partitions, journal.retention_ms) == ("acme.schemas", 1, -1)


def test_bootstrap_servers_follow_the_local_brokers_unless_set() -> None:
    three = Settings(broker={"count": 3, "first_port": 9092})
    assert three.kafka.bootstrap_servers == "127.0.0.1:9092,127.0.0.1:9102,127.0.0.1:9112"
    remote = Settings(kafka={"bootstrap_servers": "kafka-1:9092"}, broker={"count": 3})
    assert remote.kafka.bootstrap_servers == "kafka-1:9092"


def test_everything_binds_to_loopback_by_default() -> None:
    settings = Settings()
    assert settings.broker.host == "127.0.0.1"
    assert settings.postgres.host == "127.0.0.1"
    assert settings.airflow.host == "127.0.0.1"
    assert settings.spark.driver_host == "127.0.0.1"


def test_sasl_ssl_is_expressible_for_both_clients() -> None:
    settings = Settings(
        kafka={
            "bootstrap_servers": "kafka.example:9093",
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_username": "svc",
            "sasl_password": "s3cret",
            "ssl_ca_location": "/etc/ssl/ca.pem",
        }
    )
    client = settings.kafka.client_config()
    assert client["security.protocol"] == "SASL_SSL"
    assert client["sasl.password"] == "s3cret"
    spark = settings.kafka.spark_options()
    assert "ScramLoginModule" in spark["kafka.sasl.jaas.config"]
    assert spark["kafka.ssl.truststore.location"] == "/etc/ssl/ca.pem"
    assert "s3cret" not in repr(settings)  # secrets never show in logs or reprs


def test_invalid_values_are_rejected_with_the_field_named() -> None:
    with pytest.raises(ValidationError, match="count"):
        Settings(broker={"count": 2})


def test_settings_survive_the_trip_to_a_child_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = Settings(
        state_dir=tmp_path, broker={"count": 3}, spark={"extra_conf": {"a.b": "c"}},
        kafka={"sasl_password": "pw", "events_topic": {"name": "t.x", "partitions": 6}},
    )
    for key, value in original.to_environment().items():
        monkeypatch.setenv(key, value)
    assert Settings() == original


def test_the_documented_cluster_switch_works_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LAMBDALAKE_BROKER__COUNT", "3")
    assert Settings().broker.count == 3


def test_a_dotenv_file_overrides_defaults_and_the_environment_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / ".env").write_text("LAMBDALAKE_SPARK__MASTER=spark://from-dotenv:7077\n"
                                   "LAMBDALAKE_AIRFLOW__PORT=9999\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LAMBDALAKE_AIRFLOW__PORT", "7777")
    settings = Settings()
    assert settings.spark.master == "spark://from-dotenv:7077"
    assert settings.airflow.port == 7777


def test_isolated_stacks_use_distinct_ports_below_the_ephemeral_range() -> None:
    ephemeral_start = 32768  # Linux's net.ipv4.ip_local_port_range default
    taken: dict[int, int] = {}
    for slot in range(1, 10):
        with pytest.MonkeyPatch.context() as patch:
            for key, value in isolated_environment(f"slot-{slot}", slot).items():
                patch.setenv(key, value)
            settings = Settings(broker={"count": 3})
        ports = [settings.postgres.port, settings.airflow.port, settings.serving.port,
                 settings.spark.connect_port, settings.registry.port,
                 settings.registry.management_port,
                 *(port for i in range(3)
                   for port in (settings.broker.client_port(i), settings.broker.controller_port(i)))]
        assert max(ports) < ephemeral_start
        for port in ports:
            assert taken.setdefault(port, slot) == slot, f"slot {slot} reuses port {port}"
        assert len(set(ports)) == len(ports)
    with pytest.raises(ValueError, match="slot"):
        isolated_environment("eleven", 10)


def test_a_child_process_gets_only_the_credentials_it_uses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The streams get Kafka's, the registry's and the lake's; the query API its token and
    the lake's; neither gets PostgreSQL's, Airflow's or the Connect server's, nor a secret
    this process inherited."""
    from lambdalake.serving.service import SERVING_SECRETS, ServingService
    from lambdalake.stack.process import ManagedProcess
    from lambdalake.streaming.service import STREAM_SECRETS, start_app_process

    monkeypatch.setenv("LAMBDALAKE_SERVING__API_TOKEN", "inherited-token")
    settings = Settings(
        state_dir=tmp_path, serving={"api_token": "api-token"},
        kafka={"sasl_password": "kafka-password"}, registry={"password": "registry-password"},
        lake={"object_store": {"secret_access_key": "lake-key"}},
        postgres={"password": "postgres-password"}, spark={"connect_token": "connect-token"},
        airflow={"admin_password": "admin-password", "trigger_password": "trigger-password"})
    everything = {"api-token", "kafka-password", "registry-password", "lake-key",
                  "postgres-password", "connect-token", "admin-password", "trigger-password"}
    assert everything <= set(settings.to_environment().values())
    started: list[dict[str, str]] = []

    def record(self: ManagedProcess, command: list[str], env: dict[str, str], **_: object
               ) -> int:
        started.append(env)
        return 1

    monkeypatch.setattr(ManagedProcess, "start", record)
    monkeypatch.setattr(ManagedProcess, "wait_until", lambda *_, **__: None)
    start_app_process(settings, "ingest")
    ServingService(settings).start()
    stream, serving = (set(env.values()) for env in started)
    assert stream & everything == {"kafka-password", "registry-password", "lake-key"}
    assert serving & everything == {"api-token", "lake-key"}
    assert "inherited-token" not in stream | serving
    assert settings.child_environment(STREAM_SECRETS) == started[0]
    assert settings.child_environment(SERVING_SECRETS) == started[1]
    assert not set(settings.child_environment(secrets=False).values()) & everything
