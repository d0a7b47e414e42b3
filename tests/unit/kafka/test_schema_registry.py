"""Contracts as Avro schemas: what the registry holds and what travels on the wire."""

from __future__ import annotations

import io
import json
from decimal import Decimal
from pathlib import Path

import fastavro

from lambdalake.contracts.registry import ContractRegistry
from lambdalake.generator.traffic import TrafficGenerator, TrafficProfile
from lambdalake.kafka.schema_registry import avro_schema, subject
from lambdalake.settings import RegistrySettings


def test_each_contract_is_an_avro_record_with_the_fields_spark_reads() -> None:
    contracts = ContractRegistry()
    purchase = avro_schema(contracts.latest("purchase"))
    fastavro.parse_schema(purchase)
    assert (purchase["namespace"], purchase["name"]) == ("lambdalake.events", "purchase")
    types = {field["name"]: field["type"] for field in purchase["fields"]}
    assert list(types) == list(contracts.latest("purchase").fields)
    assert types["schema_version"] == "long" and types["event_id"] == "string"
    assert types["amount"] == {"type": "bytes", "logicalType": "decimal",
                               "precision": 18, "scale": 2}


def test_every_generated_event_round_trips_through_its_avro_schema() -> None:
    contracts = ContractRegistry()
    schemas = {t: fastavro.parse_schema(avro_schema(contracts.latest(t)))
               for t in contracts.event_types}
    profile = TrafficProfile(count=300, malformed_fraction=0, duplicate_fraction=0)
    for record in TrafficGenerator(profile).records():
        event = record.event
        assert event is not None
        body = io.BytesIO()
        fastavro.schemaless_writer(body, schemas[event["event_type"]], event)
        body.seek(0)
        read = fastavro.schemaless_reader(body, schemas[event["event_type"]], None)
        assert {k: v for k, v in read.items() if v is not None} == event
        if "amount" in event:
            assert isinstance(read["amount"], Decimal)


def test_an_optional_field_is_a_nullable_union_with_a_null_default(tmp_path: Path) -> None:
    for source in ContractRegistry().directory.glob("*.json"):
        (tmp_path / source.name).write_text(source.read_text())
    document = json.loads((tmp_path / "page_view.v1.json").read_text())
    document["$id"] = "page_view.v2.json"
    document["properties"]["schema_version"] = {"const": 2}
    document["properties"]["referrer"] = {"type": "string", "description": "where from"}
    (tmp_path / "page_view.v2.json").write_text(json.dumps(document))
    v2 = avro_schema(ContractRegistry(tmp_path).contracts[("page_view", 2)])
    referrer = next(field for field in v2["fields"] if field["name"] == "referrer")
    assert referrer["type"] == ["null", "string"] and referrer["default"] is None
    # a v1 record read as v2 (the reader's newest contract) gets the default
    v1 = ContractRegistry(tmp_path).contracts[("page_view", 1)]
    event = next(r.event for r in TrafficGenerator(TrafficProfile(count=50)).records()
                 if r.event and r.event["event_type"] == "page_view")
    body = io.BytesIO()
    fastavro.schemaless_writer(body, fastavro.parse_schema(avro_schema(v1)), event)
    body.seek(0)
    read = fastavro.schemaless_reader(body, fastavro.parse_schema(avro_schema(v1)),
                                      fastavro.parse_schema(v2))
    assert read["referrer"] is None and read["event_id"] == event["event_id"]


def test_each_event_type_has_its_own_subject_under_the_topic() -> None:
    assert subject("lambdalake.events", "purchase") == (
        "lambdalake.events-lambdalake.events.purchase")


def test_registry_credentials_become_basic_auth_and_the_default_is_the_local_registry() -> None:
    assert RegistrySettings(port=1234).client_config() == {
        "url": "http://127.0.0.1:1234/apis/ccompat/v7"}
    configured = RegistrySettings(url="https://registry.example:8081", username="svc",
                                  password="s3cret")  # type: ignore[arg-type]
    assert configured.client_config() == {"url": "https://registry.example:8081",
                                          "basic.auth.user.info": "svc:s3cret"}
    assert "s3cret" not in repr(configured)
