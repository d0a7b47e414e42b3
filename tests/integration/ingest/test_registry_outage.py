"""The schema registry answering 503 for a minute while ingest runs under load, JSON and
Avro producers sharing the topic: ingest keeps classifying with the schemas it knows, does
not stop, and every record lands once."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import pytest

from lambdalake.contracts.registry import ContractRegistry
from lambdalake.generator.traffic import TrafficProfile
from lambdalake.ingest.service import IngestService, ingest_process, wait_caught_up
from lambdalake.kafka.schema_registry import AvroEventCodec, register_contracts, registry_client
from lambdalake.settings import Settings
from lambdalake.streaming.progress import consumed_offsets, read_status
from tests.support.failing_proxy import FailingProxy
from tests.support.figures import Figures
from tests.support.streaming_chaos import assert_each_record_once, produce_in_background

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.usefixtures("schema_registry")
OUTAGE_SECONDS = 60


@pytest.mark.chaos
def test_a_registry_answering_503_for_a_minute_under_load_loses_and_stops_nothing(
    ingest_settings: Settings, spark: SparkSession, monkeypatch: pytest.MonkeyPatch,
    figures: Figures,
) -> None:
    registry = ingest_settings.registry
    with FailingProxy(f"http://{registry.host}:{registry.port}") as proxy:
        monkeypatch.setenv("LAMBDALAKE_REGISTRY__URL", f"{proxy.url}/apis/ccompat/v7")
        settings = Settings()  # ingest asks the registry through the proxy
        topic = settings.kafka.events_topic.name
        register_contracts(registry_client(settings.registry), ContractRegistry(), topic,
                           "BACKWARD")
        IngestService(settings).start()  # planned with the topic's schemas, known then
        pid = ingest_process(settings).pid()
        # the producers write with ids they looked up before (Avro without unknown ids:
        # one of those while the registry cannot answer fails its batch, by design)
        codec = AvroEventCodec(registry_client(settings.registry), ContractRegistry(), topic)
        avro = produce_in_background(settings, TrafficProfile(
            count=24_000, rate=250, malformed_fraction=0, seed=51, wire_format="avro"),
            avro=codec.encode)
        json = produce_in_background(settings, TrafficProfile(count=6_000, rate=60, seed=52))
        deadline = time.monotonic() + 120
        while sum(consumed_offsets(read_status(settings, "ingest") or {}).values()) < 3_000:
            assert time.monotonic() < deadline, "ingest committed no batch of the traffic"
            time.sleep(0.5)
        proxy.failing.set()
        refused_before = proxy.refused
        time.sleep(OUTAGE_SECONDS)
        proxy.failing.clear()
        manifests = [avro.manifest(timeout=300), json.manifest(timeout=300)]
        wait_caught_up(settings, timeout=300)
        assert ingest_process(settings).pid() == pid, "ingest stopped during the outage"
        assert proxy.refused > refused_before  # it was asked, and refused, meanwhile
        assert (read_status(settings, "ingest") or {}).get("active") is True
    assert_each_record_once(spark, settings, manifests)
    figures(records=sum(m.produced for m in manifests), outage_seconds=OUTAGE_SECONDS,
            registry_requests_refused=proxy.refused, forwarded=proxy.forwarded, lost=0,
            duplicated=0, ingest_restarts=0)
