"""The contracts in the stack's real schema registry (Apicurio, Confluent-compatible API):
registered idempotently, evolution refused with the registry's reason, schemas kept across
a restart, and Avro events written by one contract version read by another."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer

from lambdalake.cli.main import main
from lambdalake.contracts.registry import ContractError, ContractRegistry, EntityRegistry
from lambdalake.generator.traffic import TrafficGenerator, TrafficProfile
from lambdalake.kafka.producer import EventProducer
from lambdalake.kafka.registry_server import LocalSchemaRegistry
from lambdalake.kafka.schema_registry import (
    AvroEventCodec,
    event_encoder,
    register_contracts,
    registry_client,
    subject,
)
from lambdalake.kafka.topics import ensure_topic
from lambdalake.settings import Settings, TopicSettings
from lambdalake.stack.kafka_broker import KafkaCluster
from tests.support.contracts import contracts_with_page_view_v2

pytestmark = pytest.mark.usefixtures("schema_registry")


def a_page_view() -> dict[str, object]:
    records = TrafficGenerator(TrafficProfile(count=100, malformed_fraction=0)).records()
    event = next(r.event for r in records if r.event and r.event["event_type"] == "page_view")
    return dict(event)


def test_setup_registers_the_contracts_once_and_the_cli_checks_against_the_registry(
    settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["contracts", "register"]) == 0
    first = capsys.readouterr().out
    assert main(["contracts", "register"]) == 0
    again = capsys.readouterr().out

    def registered(out: str) -> list[str]:
        return [line for line in out.splitlines() if line.startswith("registered ")]

    assert registered(again) == registered(first)  # same subjects, versions and schema ids
    topics = [settings.kafka.events_topic.name, *(settings.kafka.entity_topic(e).name
                                                  for e in EntityRegistry().entities)]
    assert [f"topic {name}: as configured" for name in topics] == [
        line for line in again.splitlines() if line.startswith("topic ")]
    for event_type in ContractRegistry().event_types:
        name = subject(settings.kafka.events_topic.name, event_type)
        assert f"registered {name} v1 (schema id " in first
        assert registry_client(settings.registry).get_compatibility(name) == "BACKWARD"
    assert main(["contracts"]) == 0
    assert f"locally and in {settings.registry.local_url}" in capsys.readouterr().out


def test_an_incompatible_change_is_refused_by_the_registry_and_by_the_cli(
    settings: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["contracts", "register"]) == 0
    incompatible = contracts_with_page_view_v2(tmp_path / "events", referrer_required=True)
    capsys.readouterr()
    assert main(["contracts", "register", "--dir", str(incompatible.directory)]) == 1
    refused = capsys.readouterr().err
    assert "new required field 'referrer'" in refused  # the local check
    assert "page_view v2: the schema registry would refuse it: not BACKWARD-compatible" in refused
    with pytest.raises(ContractError, match=r"refused it \(BACKWARD, HTTP 409\).*referrer"):
        register_contracts(registry_client(settings.registry), incompatible,
                           settings.kafka.events_topic.name, "BACKWARD")
    latest = registry_client(settings.registry).get_latest_version(
        subject(settings.kafka.events_topic.name, "page_view"))
    assert latest.version == 1  # nothing reached the subject


def test_a_v2_writer_and_a_v1_reader_agree_through_the_registry_and_its_restart(
    settings: Settings, schema_registry: LocalSchemaRegistry, tmp_path: Path
) -> None:
    topic = f"avro-{uuid.uuid4().hex[:8]}"  # subjects of its own
    client = registry_client(settings.registry)
    v2_contracts = contracts_with_page_view_v2(tmp_path / "events", referrer_required=False)
    registered = register_contracts(client, v2_contracts, topic, "BACKWARD")
    assert [(r.version, r.subject) for r in registered if "page_view" in r.subject] == [
        (1, subject(topic, "page_view")), (2, subject(topic, "page_view"))]

    v1_event = a_page_view()
    v2_event = {**a_page_view(), "schema_version": 2, "referrer": "https://example.org/"}
    writer = AvroEventCodec(client, v2_contracts, topic)
    v1_wire, v2_wire = writer.encode(v1_event), writer.encode(v2_event)
    assert v1_wire[0] == 0 and v1_wire[1:5] != v2_wire[1:5]  # magic byte, two schema ids

    schema_registry.stop()  # the schemas live in the Kafka journal, replayed at start
    schema_registry.start()
    assert register_contracts(registry_client(settings.registry), v2_contracts, topic,
                              "BACKWARD") == registered

    old_reader = AvroEventCodec(registry_client(settings.registry), ContractRegistry(), topic)
    read = old_reader.decode(v2_wire)
    assert read == {k: v for k, v in v2_event.items() if k != "referrer"}  # v1's fields
    new_reader = AvroEventCodec(registry_client(settings.registry), v2_contracts, topic)
    assert new_reader.decode(v1_wire) == {**v1_event, "referrer": None}
    with pytest.raises(ContractError, match="magic byte"):
        new_reader.decode(json.dumps(v1_event).encode())


def test_the_producer_sends_avro_as_the_setting_says_and_it_reads_back(
    settings: Settings, kafka: KafkaCluster
) -> None:
    topic = TopicSettings(name=f"avro-{uuid.uuid4().hex[:8]}", partitions=1)
    ensure_topic(settings.kafka, topic)
    avro = settings.model_copy(deep=True)
    avro.kafka.events_topic, avro.kafka.events_format = topic, "avro"
    contracts = ContractRegistry()
    register_contracts(registry_client(settings.registry), contracts, topic.name, "BACKWARD")
    sent = [a_page_view() | {"event_id": f"e-{i}"} for i in range(5)]
    producer = EventProducer(avro.kafka, topic.name, encode=event_encoder(avro))
    for event in sent:
        producer.send_event(event, contracts)
    assert producer.flush() == 0 and producer.counts.acknowledged == len(sent)
    consumer = Consumer({**settings.kafka.client_config(), "group.id": f"g-{uuid.uuid4()}",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic.name])
    values = []
    deadline = time.monotonic() + 60
    while len(values) < len(sent) and time.monotonic() < deadline:
        values += [m.value() for m in consumer.consume(10, timeout=1) if m.error() is None]
    consumer.close()
    codec = AvroEventCodec(registry_client(settings.registry), contracts, topic.name)
    assert [codec.decode(value) for value in values] == sent
    assert all(value[0] == 0 for value in values)  # the Confluent wire format, not JSON
