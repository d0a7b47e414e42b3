"""Avro in the Confluent wire format, decoded by Spark with the registry's writer schemas:
the same typed events as JSON, read as the newest contract, and every Avro-specific fault
quarantined with its own reason."""

from __future__ import annotations

import struct
import uuid
from typing import TYPE_CHECKING, Any

import pytest

from lambdalake.contracts.registry import ContractRegistry, encode_event
from lambdalake.generator.traffic import AVRO_MALFORMED_KINDS, TrafficGenerator, TrafficProfile
from lambdalake.kafka.schema_registry import (
    AvroEventCodec,
    AvroSchemas,
    TopicSchemas,
    register_contracts,
    registry_client,
)
from lambdalake.settings import Settings
from lambdalake.streaming.classification import classify
from tests.integration.ingest.test_classification import KAFKA_SCHEMA, NOW
from tests.support.contracts import contracts_with_page_view_v2

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.usefixtures("schema_registry")


@pytest.fixture(scope="module")
def topic(settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A topic whose subjects hold the contracts and a compatible page_view v2."""
    name = f"avro-{uuid.uuid4().hex[:8]}"
    register_contracts(registry_client(settings.registry), v2_contracts(tmp_path_factory),
                       name, "BACKWARD")
    return name


def v2_contracts(tmp_path_factory: pytest.TempPathFactory) -> ContractRegistry:
    return contracts_with_page_view_v2(tmp_path_factory.getbasetemp() / "events-v2")


def classified(spark: SparkSession, settings: Settings, values: list[bytes | None],
               schemas: AvroSchemas) -> DataFrame:
    rows = [(b"k", v, "t", 0, i, NOW.replace(tzinfo=None), 0) for i, v in enumerate(values)]
    return classify(spark.createDataFrame(rows, KAFKA_SCHEMA), ContractRegistry(),
                    settings.ingest, schemas).orderBy("offset")


def events(count: int) -> list[dict[str, Any]]:
    profile = TrafficProfile(count=count, seed=11, start_time=NOW, malformed_fraction=0,
                             duplicate_fraction=0)
    return [dict(r.event) for r in TrafficGenerator(profile).records() if r.event]


def test_avro_events_read_as_the_same_typed_events_as_their_json(
    spark: SparkSession, settings: Settings, topic: str
) -> None:
    sample = events(400)
    codec = AvroEventCodec(registry_client(settings.registry), ContractRegistry(), topic)
    schemas = TopicSchemas(settings.registry, ContractRegistry(), topic).current()
    assert schemas.complete and len(schemas.by_id) == 4  # three v1 schemas, page_view v2
    as_json = classified(spark, settings, [encode_event(e) for e in sample], schemas)
    as_avro = classified(spark, settings, [codec.encode(e) for e in sample], schemas)
    columns = [c for c in as_json.columns if c not in ("value",)]
    assert as_avro.select(columns).collect() == as_json.select(columns).collect()
    assert as_avro.where("quarantine_reason IS NOT NULL").count() == 0


def test_every_generated_avro_record_gets_the_reason_its_kind_intends(
    spark: SparkSession, settings: Settings, topic: str
) -> None:
    codec = AvroEventCodec(registry_client(settings.registry), ContractRegistry(), topic)
    profile = TrafficProfile(count=2000, seed=9, start_time=NOW, malformed_fraction=0.3,
                             wire_format="avro")
    records = list(TrafficGenerator(profile, avro=codec.encode).records())
    assert {r.kind for r in records} == {"valid", "duplicate", *AVRO_MALFORMED_KINDS}
    schemas = TopicSchemas(settings.registry, ContractRegistry(), topic).current()
    got = [r.quarantine_reason for r in classified(
        spark, settings, [r.value for r in records], schemas).collect()]
    expected = [None if r.kind in ("valid", "duplicate") else r.kind for r in records]
    assert [(r.kind, g) for r, g, e in zip(records, got, expected, strict=True) if g != e] == []


def test_avro_faults_get_their_own_reasons_and_json_shares_the_topic(
    spark: SparkSession, settings: Settings, topic: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    client = registry_client(settings.registry)
    v1 = AvroEventCodec(client, ContractRegistry(), topic)
    v2 = AvroEventCodec(client, v2_contracts(tmp_path_factory), topic)
    page_view = next(e for e in events(50) if e["event_type"] == "page_view")
    purchase = next(e for e in events(50) if e["event_type"] == "purchase")
    body = v1.encode(purchase)
    cases = {
        "v1 Avro": (v1.encode(purchase), None),
        "v2 Avro, read as v1": (v2.encode({**page_view, "schema_version": 2,
                                           "referrer": "https://example.org"}), None),
        "JSON beside it": (encode_event(page_view), None),
        "an unregistered schema id": (b"\x00" + struct.pack(">I", 987654) + body[5:],
                                      "unknown_schema_id"),
        "a truncated body": (body[:12], "invalid_avro"),
        "no magic byte (and not UTF-8)": (body[5:], "invalid_utf8"),
        "a contract constraint": (v1.encode({**purchase, "device": "smart-fridge"}),
                                  "constraint_violation"),
    }
    schemas = TopicSchemas(settings.registry, ContractRegistry(), topic).current()
    rows = classified(spark, settings, [value for value, _ in cases.values()], schemas).collect()
    got = {name: row.quarantine_reason for name, row in zip(cases, rows, strict=True)}
    assert got == {name: reason for name, (_, reason) in cases.items()}
    assert rows[3].quarantine_detail == "987654"
    assert rows[1].schema_version == 2 and rows[1].page == page_view["page"]


def test_an_unknown_id_while_the_registry_is_unreachable_fails_the_batch_not_the_record(
    spark: SparkSession, settings: Settings, topic: str
) -> None:
    codec = AvroEventCodec(registry_client(settings.registry), ContractRegistry(), topic)
    sample = events(10)
    unreachable = AvroSchemas({}, complete=False)
    json_only = classified(spark, settings, [encode_event(e) for e in sample], unreachable)
    assert json_only.where("quarantine_reason IS NULL").count() == len(sample)
    with pytest.raises(Exception, match="schema registry did not answer, and schema id"):
        classified(spark, settings, [codec.encode(sample[0])], unreachable).collect()
