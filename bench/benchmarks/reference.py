"""Reference data's costs: the speed layer's state for a million keys, and the batch layer's
point-in-time join.

The speed layer's state: what a million keys cost its driver, and how fast it is rebuilt
from a compacted topic at start.

A product topic of ``keys`` products (1,000,000 in the full profile) is produced once. In a
fresh process each, the same run reads it to its end:
- ``CurrentReference`` (what the speed driver does before its queries start: every record
  checked against the contract, the joined attributes kept per key);
- the bare baseline: a plain consumer reading every record to the end, keeping nothing.
The state's memory is the process's resident-set growth once the state is built and its
consumer closed (its fetch buffers freed), per key.

The batch layer's join as of event time (``as_of_event_time``): ``events`` synthetic purchases
(10 million in the full profile) of one day, the interval computed, over 100,000 products
with three versions each, joined and aggregated by category, against the bare baseline a
user would write without history: an equi-join of the same events with one row per
product, aggregated the same way. Both in one warm SparkSession, best of two. Two
histories:
- ``typical``: the versions began 30, 20 and 10 days before the computed day, so one
  version of each key overlaps it (the batch layer joins only the versions overlapping
  the interval it computes);
- ``churn``: every product changed three times *within* the computed day, the worst case:
  each event's key has three versions to choose from.
"""

from __future__ import annotations

import gc
import os
import time
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import psutil

from bench.harness.common import Result, in_own_process
from lambdalake.contracts.registry import encode_event
from lambdalake.kafka.producer import EventProducer
from lambdalake.kafka.topics import ensure_topic
from lambdalake.settings import Settings
from lambdalake.views.definition import Join

KEYS = {"quick": 100_000, "full": 1_000_000}
EVENTS = {"quick": 1_000_000, "full": 10_000_000}
PRODUCTS = 100_000
VERSIONS = 3
JOIN = Join(entity="product", key="product_id", attributes=["category", "brand"])


def produce_catalogue(settings: Settings, keys: int) -> None:
    topic = settings.kafka.entity_topic("product")
    ensure_topic(settings.kafka, topic)
    producer = EventProducer(settings.kafka, topic.name)
    for number in range(keys):
        key = f"product-{number:07d}"
        producer.send(key, encode_event({
            "entity": "product", "schema_version": 1, "product_id": key,
            "name": f"Product {number}", "category": ("books", "toys", "garden")[number % 3],
            "brand": f"brand-{number % 500}", "list_price": Decimal(number % 50_000) / 100,
            "updated_at": "2026-11-23T06:00:00.000Z"}))
    assert producer.flush() == 0 and producer.counts.acknowledged == keys


def build_state(settings: Settings) -> dict[str, Any]:
    """Seconds and resident memory to build the speed layer's state (own process)."""
    from lambdalake.speed.reference_state import CurrentReference

    process = psutil.Process(os.getpid())
    before = process.memory_info().rss
    started = time.monotonic()
    state = CurrentReference(settings, [JOIN])
    state.start(timeout=3600)
    seconds = time.monotonic() - started
    with_consumer = process.memory_info().rss - before
    keys = state.status()["entities"]["product"]["keys"]
    state.close()  # the consumer's fetch buffers go; the state stays referenced
    gc.collect()
    grown = process.memory_info().rss - before
    assert state.state["product"]
    return {"seconds": seconds, "keys": keys, "rss_growth_bytes": grown,
            "rss_growth_with_consumer_bytes": with_consumer}


def read_bare(settings: Settings) -> dict[str, Any]:
    """Seconds for a plain consumer to read the same topic to its end (own process)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    topic = settings.kafka.entity_topic("product").name
    consumer = Consumer({**settings.kafka.client_config(), "group.id": "bench-bare",
                         "enable.auto.commit": False})
    partitions = [TopicPartition(topic, number, OFFSET_BEGINNING) for number in
                  consumer.list_topics(timeout=30).topics[topic].partitions]
    ends = {p.partition: consumer.get_watermark_offsets(p, timeout=30)[1] for p in partitions}
    started = time.monotonic()
    consumer.assign(partitions)
    records = 0
    while any(p.offset < ends[p.partition] for p in consumer.position(partitions)):
        records += sum(m.error() is None for m in consumer.consume(10_000, timeout=0.5))
    seconds = time.monotonic() - started
    consumer.close()
    return {"seconds": seconds, "records": records}


HISTORIES = {"typical": (-30, 10), "churn": (0, 1 / 3)}
"""History shapes: (the first version's start, the days between versions), in days from the
computed day's start."""


def join_seconds(settings: Settings, events: int, history: str) -> dict[str, float]:
    """Seconds for the as-of join and for the bare join, each aggregated (own process)."""
    from pyspark.sql import functions as F

    from lambdalake.spark import get_spark
    from lambdalake.views.definition import ViewDefinition
    from lambdalake.views.enrichment import as_of_event_time

    spark = get_spark("bench-reference-join", settings)
    view = ViewDefinition.model_validate({
        "name": "units_by_category", "description": "-", "event_types": ["purchase"],
        "grain": "1 hour", "lateness": "10 minutes", "dimensions": ["category"],
        "measures": [{"name": "units", "kind": "sum", "column": "quantity"}],
        "joins": [{"entity": "product", "key": "product_id", "attributes": ["category"]}]})
    day, first_day = 86_400, 1_795_000_000
    purchases = spark.range(events).select(
        F.format_string("product-%07d", (F.col("id") * 7919) % PRODUCTS).alias("product_id"),
        F.timestamp_seconds(F.lit(first_day) + (F.col("id") * day) / events)
        .alias("occurred_at"),
        (F.col("id") % 5 + 1).alias("quantity")).cache()
    purchases.count()
    first, every = HISTORIES[history]
    number = F.floor(F.col("id") / PRODUCTS)
    versions = spark.range(PRODUCTS * VERSIONS).select(
        F.format_string("product-%07d", F.col("id") % PRODUCTS).alias("entity_key"),
        F.timestamp_seconds((F.lit(first_day + first * day) + number * every * day)
                            .cast("long")).alias("valid_from"),
        F.when(number < VERSIONS - 1, F.timestamp_seconds(
            (F.lit(first_day + first * day) + (number + 1) * every * day).cast("long")))
        .alias("valid_to"),
        F.element_at(F.array(*map(F.lit, ("books", "toys", "garden"))),
                     (F.col("id") % 3 + 1).cast("int")).alias("category")).cache()
    current = versions.where("valid_to IS NULL").select(
        F.col("entity_key").alias("product_id"), "category").cache()
    versions.count(), current.count()
    computed = (datetime.fromtimestamp(first_day, UTC),
                datetime.fromtimestamp(first_day + day, UTC))

    def as_of() -> None:
        joined = as_of_event_time(purchases, view, lambda _join: versions, during=computed)
        joined.groupBy("category").agg(F.sum("quantity")).collect()

    def bare() -> None:
        purchases.join(F.broadcast(current), "product_id", "left").groupBy("category").agg(
            F.sum("quantity")).collect()

    timings: dict[str, float] = {}
    for name, query in (("as_of", as_of), ("bare", bare)) * 2:
        started = time.monotonic()
        query()
        timings[name] = min(timings.get(name, float("inf")), time.monotonic() - started)
    return timings


def run(settings: Settings, profile: str) -> list[Result]:
    kafka = settings.kafka
    topic = kafka.reference_topic.model_copy(  # a topic of this run's products only
        update={"name": f"bench.reference.{int(time.time())}"})
    settings = settings.model_copy(update={"kafka": kafka.model_copy(
        update={"reference_topic": topic})})
    events = EVENTS[profile]
    print(f"reference: joining {events:,} events with {PRODUCTS:,} products' history",
          flush=True)
    joins = {history: in_own_process(join_seconds, settings, events, history)
             for history in HISTORIES}
    keys = KEYS[profile]
    print(f"reference: producing {keys:,} products", flush=True)
    produce_catalogue(settings, keys)
    bare = in_own_process(read_bare, settings)
    state = in_own_process(build_state, settings)
    assert state["keys"] == keys == bare["records"], (state, bare)
    per_key = state["rss_growth_bytes"] / keys
    return [
        Result("reference state: rebuild from the compacted topic", "records/s",
               keys / state["seconds"], keys / bare["seconds"], "bare consumer",
               details={"keys": keys, "state": state, "bare": bare}),
        Result("reference state: memory per key (2 attributes)", "bytes", per_key,
               details={"keys": keys, "resident_growth_mib":
                        round(state["rss_growth_bytes"] / 2**20, 1)}),
        *(Result(f"batch join as of event time, {history} history", "s",
                 timings["as_of"], timings["bare"], "bare equi-join with the current rows",
                 goal="within 1.3x" if history == "typical" else None,
                 details={"events": events, "products": PRODUCTS, "versions": VERSIONS,
                          "history": history})
          for history, timings in joins.items()),
    ]
