"""Reference data through ingest: every change of the compacted topics lands once in the
changelog or the quarantine; history and current state equal the manifest's; a view joined
as of event time counts what the manifest says; the speed layer's current state read from
the topics is the truth's and follows new changes; and after Kafka's log cleaner compacted
the topics, that state rebuilt from them is the same."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING

import pytest
from pyspark.errors import AnalysisException

from lambdalake.batch.recompute import compute_slice
from lambdalake.contracts.registry import EntityRegistry, encode_event
from lambdalake.generator.catalogue import REFERENCE_MALFORMED_KINDS, event_time
from lambdalake.generator.traffic import TrafficGenerator, TrafficProfile, produce_traffic
from lambdalake.ingest.service import start_ingest_process, wait_caught_up
from lambdalake.kafka.producer import EventProducer
from lambdalake.kafka.topics import ensure_platform_topics
from lambdalake.lake.bronze import BRONZE_TABLE
from lambdalake.lake.delta_rs import table_version
from lambdalake.lake.reference import (
    CHANGES_TABLE,
    CURRENT_TABLE,
    HISTORY_TABLE,
    QUARANTINE_TABLE,
)
from lambdalake.operations.traffic import reference_producers
from lambdalake.settings import Settings
from lambdalake.speed.reference_state import CurrentReference
from lambdalake.views.definition import UNKNOWN_MEMBER, Join, ViewDefinition
from tests.support.clock import hours_ago
from tests.support.ground_truth import expected_view, manifest_events
from tests.support.reference_topics import compacting_now, records_in
from tests.support.reference_truth import (
    expected_history,
    expected_quarantine,
    with_attributes_as_of_event_time,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

START = hours_ago(1)  # the traffic goes through Kafka: relative to now (tests/support/clock.py)
SALES_BY_CATEGORY = ViewDefinition.model_validate({
    "name": "sales_by_category", "description": "Cart additions and purchases per category.",
    "event_types": ["add_to_cart", "purchase"], "grain": "1 hour", "lateness": "10 minutes",
    "dimensions": ["category"],
    "measures": [{"name": "events", "kind": "count"},
                 {"name": "units", "kind": "sum", "column": "quantity"}],
    "joins": [{"entity": "product", "key": "product_id", "attributes": ["category"]}],
})
JOINS = [Join(entity="product", key="product_id", attributes=["category", "brand"]),
         Join(entity="user_profile", key="user_id", attributes=["segment"])]
HELD = {join.entity: tuple(join.attributes) for join in JOINS}
ATTRIBUTES = {"product": ("category", "list_price", "brand"),
              "user_profile": ("segment", "signup_country")}


def versions_of(frame: DataFrame) -> set[tuple]:
    """(entity, key, valid_from, valid_to, attributes...) of history or current rows."""
    has_end = "valid_to" in frame.columns
    return {
        (row.entity, row.entity_key, row.valid_from.astimezone(UTC),
         row.valid_to.astimezone(UTC) if has_end and row.valid_to else None,
         *(row[name] for name in ATTRIBUTES[row.entity]))
        for row in frame.collect()
    }


def as_expected(versions, current_only: bool = False) -> set[tuple]:
    def typed(name: str, value: object) -> object:
        return Decimal(value) if name == "list_price" else value

    return {
        (v.entity, v.key, v.valid_from, v.valid_to,
         *(typed(name, v.value[name]) for name in ATTRIBUTES[v.entity]))
        for v in versions if not current_only or v.valid_to is None
    }


def test_reference_changes_land_once_and_history_survives_compaction(
    ingest_settings: Settings, spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LAMBDALAKE_KAFKA__REFERENCE_TOPIC__NAME",
                       f"test.compacting.{uuid.uuid4().hex[:8]}")
    monkeypatch.setenv("LAMBDALAKE_KAFKA__REFERENCE_TOPIC__SEGMENT_MS", "500")  # many closed
    settings = Settings()
    ensure_platform_topics(settings.kafka)
    topics = [settings.kafka.entity_topic(e).name for e in EntityRegistry().entities]
    start_ingest_process(settings)
    profile = TrafficProfile(count=4_000, rate=1_000, users=150, products=40, seed=31,
                             start_time=START, event_time_rate=2, reference_change_every=10)
    manifest = produce_traffic(
        TrafficGenerator(profile), EventProducer(settings.kafka, settings.kafka.events_topic.name),
        reference=reference_producers(settings))
    changes = manifest.reference_changes
    assert manifest.failed == 0 and manifest.reference_acknowledged == len(changes)
    truth = expected_history(changes)
    quarantined = expected_quarantine(changes)
    assert quarantined and any(c["kind"] == "product_deletion" for c in changes)

    wait_caught_up(settings, timeout=300)

    def landed() -> int:
        try:
            return sum(spark.read.format("delta").load(settings.table_path(table)).count()
                       for table in (CHANGES_TABLE, QUARANTINE_TABLE))
        except AnalysisException:  # not written yet
            return 0

    deadline = time.monotonic() + 120  # the reference stream has its own, slower trigger
    while landed() < len(changes) and time.monotonic() < deadline:
        time.sleep(2)
    changelog = spark.read.format("delta").load(settings.table_path(CHANGES_TABLE))
    quarantine = spark.read.format("delta").load(settings.table_path(QUARANTINE_TABLE))
    valid = len(changes) - sum(quarantined.values())
    assert changelog.count() == valid
    assert {r.quarantine_reason: r["count"] for r in
            quarantine.groupBy("quarantine_reason").count().collect()} == quarantined
    coordinates = changelog.select("topic", "partition", "offset").union(
        quarantine.select("topic", "partition", "offset"))
    assert coordinates.distinct().count() == len(changes)

    # the lake's history and current state are the manifest's (the refresh follows the
    # changelog's commit within the same micro-batch)
    def lake(table: str) -> set[tuple]:
        try:
            return versions_of(spark.read.format("delta").load(settings.table_path(table)))
        except AnalysisException:  # not written yet
            return set()

    wanted = {HISTORY_TABLE: as_expected(truth), CURRENT_TABLE: as_expected(truth, True)}
    deadline = time.monotonic() + 60
    while any(lake(t) != rows for t, rows in wanted.items()) and time.monotonic() < deadline:
        time.sleep(1)
    assert lake(HISTORY_TABLE) == wanted[HISTORY_TABLE]
    assert lake(CURRENT_TABLE) == wanted[CURRENT_TABLE]
    current = spark.read.format("delta").load(settings.table_path(CURRENT_TABLE))
    assert current.groupBy("entity", "entity_key").count().where("count > 1").count() == 0

    # a view joined with the products as of each event's time counts what the truth counts,
    # events of deleted products under the unknown member
    bronze_version = table_version(settings.table_path(BRONZE_TABLE))
    answer = compute_slice(spark, settings, SALES_BY_CATEGORY, START - timedelta(hours=1),
                           START + timedelta(hours=1), bronze_version).toPandas()
    events = with_attributes_as_of_event_time(manifest_events(manifest), SALES_BY_CATEGORY,
                                              changes)
    expected = expected_view(events, SALES_BY_CATEGORY, START - timedelta(hours=1),
                             START + timedelta(hours=1))
    assert UNKNOWN_MEMBER in set(expected["category"])
    assert sorted(map(tuple, answer[["window_start", "category", "events", "units"]].values)) == (
        sorted(map(tuple, expected[["window_start", "category", "events", "units"]].values)))

    # the speed layer's current state, read from the topics, is the truth's current state,
    # and follows a change made after it started
    current_truth = {(v.entity, v.key): tuple(str(v.value[a]) for a in HELD[v.entity])
                     for v in truth if v.valid_to is None}
    reference = CurrentReference(settings, JOINS)
    reference.start(timeout=60)
    try:
        assert held(reference) == current_truth
        assert reference.status()["entities"]["product"]["skipped"] == sum(
            c["kind"] in REFERENCE_MALFORMED_KINDS for c in changes)
        product = next(v for v in truth if v.entity == "product" and v.valid_to is None)
        renamed = {**product.value, "brand": "newbrand",
                   "updated_at": event_time(START + timedelta(hours=1)),
                   "list_price": Decimal(product.value["list_price"])}  # the manifest's: str
        producer = reference_producers(settings)["product"]
        producer.send(product.key, encode_event(renamed))
        assert producer.flush() == 0
        current_truth[("product", product.key)] = (product.value["category"], "newbrand")
        assert reference.catch_up(30)  # as a micro-batch does before it joins
        assert held(reference) == current_truth
        assert reference.lookup(JOINS[0], [product.key, "product-none"]) == {
            "category": [product.value["category"], None], "brand": ["newbrand", None]}
    finally:
        reference.close()

    # the log cleaner drops superseded values from the topics; the changelog keeps them, and
    # the compacted topics alone still give the same current state, deletions included, for
    # every key whose last record is well-formed (a malformed last record shadows the key's
    # good value once the cleaner has run: the changelog still has it)
    with compacting_now(settings, topics):
        deadline = time.monotonic() + 120
        while records_in(settings, topics) > len(changes):  # and the renaming
            assert time.monotonic() < deadline, "the log cleaner did not compact the topics"
            time.sleep(2)
    last = {(c["entity"], c["key"]): c["kind"] for c in changes}
    shadowed = {key for key, kind in last.items() if kind in REFERENCE_MALFORMED_KINDS}
    rebuilt = CurrentReference(settings, JOINS)
    rebuilt.start(timeout=60)
    try:
        assert {k: v for k, v in held(rebuilt).items() if k not in shadowed} == {
            k: v for k, v in current_truth.items() if k not in shadowed}
    finally:
        rebuilt.close()


def held(reference: CurrentReference) -> dict[tuple[str, str], tuple[str, ...]]:
    return {(entity, key): values for entity, keys in reference.state.items()
            for key, values in keys.items()}
