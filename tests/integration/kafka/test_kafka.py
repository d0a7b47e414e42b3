"""The real Kafka broker: keyed, idempotent produce; consumer groups resume from commits."""

from __future__ import annotations

import uuid
from collections import defaultdict

import pytest
from confluent_kafka import Consumer, TopicPartition

from lambdalake.kafka.producer import EventProducer
from lambdalake.kafka.topics import TopicMismatch, ensure_topic
from lambdalake.settings import Settings, TopicSettings
from lambdalake.stack.kafka_broker import KafkaCluster

MESSAGES = 10_000
KEYS = 50


def consume(consumer: Consumer, wanted: int, timeout: float = 60.0) -> list[tuple[str, int, int]]:
    """Poll until ``wanted`` records arrived; return (key, partition, offset) of each."""
    records: list[tuple[str, int, int]] = []
    while len(records) < wanted:
        batch = consumer.consume(min(500, wanted - len(records)), timeout=timeout)
        assert batch, f"no records within {timeout}s after {len(records)} of {wanted}"
        for message in batch:
            assert message.error() is None, message.error()
            records.append((message.key().decode(), message.partition(), message.offset()))
    return records


def group_consumer(settings: Settings, group: str, topic: str) -> Consumer:
    consumer = Consumer({
        **settings.kafka.client_config(),
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    })
    consumer.subscribe([topic])
    return consumer


def test_keyed_idempotent_produce_and_group_resume(kafka: KafkaCluster, settings: Settings) -> None:
    topic = TopicSettings(name=f"test.resume.{uuid.uuid4().hex[:8]}", partitions=3)
    assert ensure_topic(settings.kafka, topic).created

    producer = EventProducer(settings.kafka, topic.name)
    for n in range(MESSAGES):
        producer.send(f"user-{n % KEYS}", f'{{"n": {n}}}')
    assert producer.flush() == 0
    assert producer.counts.acknowledged == MESSAGES and producer.counts.failed == 0

    group = f"test-group-{uuid.uuid4().hex[:8]}"
    first = group_consumer(settings, group, topic.name)
    first_half = consume(first, MESSAGES // 2)
    first.commit(asynchronous=False)
    committed = first.committed(
        [TopicPartition(topic.name, p) for p in range(topic.partitions)], timeout=10
    )
    first.close()

    second = group_consumer(settings, group, topic.name)
    second_half = consume(second, MESSAGES - len(first_half))
    extra = second.consume(10, timeout=2)
    second.close()

    assert extra == [], "the restarted consumer re-read or over-read records"
    seen = {(p, o) for _, p, o in first_half + second_half}
    assert len(seen) == MESSAGES, "records were read twice or skipped across the restart"
    resumed_at = {p: min(o for _, q, o in second_half if q == p) for _, p, _ in second_half}
    for tp in committed:  # a partition the first consumer never read has no commit: earliest
        expected_start = tp.offset if tp.offset >= 0 else 0
        if tp.partition in resumed_at:
            assert resumed_at[tp.partition] == expected_start, "did not resume at the commit"

    partitions_of_key: dict[str, set[int]] = defaultdict(set)
    for key, partition, _ in first_half + second_half:
        partitions_of_key[key].add(partition)
    assert len(partitions_of_key) == KEYS
    assert all(len(parts) == 1 for parts in partitions_of_key.values())
    assert len({next(iter(p)) for p in partitions_of_key.values()}) == topic.partitions


def test_an_existing_topic_that_differs_is_reported(kafka: KafkaCluster, settings: Settings) -> None:
    topic = TopicSettings(name=f"test.drift.{uuid.uuid4().hex[:8]}", partitions=3)
    ensure_topic(settings.kafka, topic)
    assert not ensure_topic(settings.kafka, topic).created
    wider = topic.model_copy(update={"partitions": 6, "retention_ms": 1000})
    with pytest.raises(TopicMismatch, match="partitions: settings 6, topic 3") as error:
        ensure_topic(settings.kafka, wider)
    assert "retention.ms: settings 1000" in str(error.value)
