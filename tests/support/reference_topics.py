"""The entities' compacted topics as a test sees them: compacting them now, counting and
reading what they hold."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Message, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from lambdalake.contracts.registry import EntityRegistry
from lambdalake.settings import Settings


@contextmanager
def compacting_now(settings: Settings, topics: list[str]) -> Iterator[None]:
    """Let the log cleaner take any closed segment of ``topics`` at once (no compaction lag,
    and not only segments that are half superseded) while the block runs; then the topics'
    own settings again, so the platform finds them as configured."""
    lag = settings.kafka.reference_topic.min_compaction_lag_ms
    _alter(settings, topics, {"min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": "0"})
    try:
        yield
    finally:
        _alter(settings, topics, {"min.compaction.lag.ms": str(lag)},
               delete=["min.cleanable.dirty.ratio"])


def _alter(settings: Settings, topics: list[str], configs: dict[str, str],
           delete: list[str] | None = None) -> None:
    admin = AdminClient(settings.kafka.client_config())
    for topic in topics:
        resource = ConfigResource("topic", topic, incremental_configs=[
            *(ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
              for name, value in configs.items()),
            *(ConfigEntry(name, None, incremental_operation=AlterConfigOpType.DELETE)
              for name in delete or [])])
        admin.incremental_alter_configs([resource])[resource].result(30)


def messages_in(settings: Settings, topics: list[str]) -> Iterator[Message]:
    """Every record the topics hold now (a compacted topic's offsets have gaps)."""
    consumer = Consumer({**settings.kafka.client_config(), "group.id": uuid.uuid4().hex,
                         "enable.auto.commit": False})
    metadata = consumer.list_topics(timeout=30)
    partitions = [TopicPartition(topic, number, OFFSET_BEGINNING) for topic in topics
                  for number in metadata.topics[topic].partitions]
    ends = {(p.topic, p.partition): consumer.get_watermark_offsets(p, timeout=30)[1]
            for p in partitions}
    consumer.assign(partitions)
    try:
        while any(p.offset < ends[(p.topic, p.partition)] for p in consumer.position(partitions)):
            yield from (m for m in consumer.consume(1000, timeout=0.5) if m.error() is None)
    finally:
        consumer.close()


def records_in(settings: Settings, topics: list[str]) -> int:
    return sum(1 for _ in messages_in(settings, topics))


def latest_good_values(settings: Settings, entity: str, attributes: list[str]
                       ) -> dict[str, tuple[str, ...]]:
    """What a reader of ``entity``'s topic from its beginning ends with: per key, the
    attributes of its last record if that record is well-formed and not a deletion."""
    entities = EntityRegistry()
    key_field = entities.latest(entity).key
    state: dict[str, tuple[str, ...]] = {}
    for message in messages_in(settings, [settings.kafka.entity_topic(entity).name]):
        key, value = (message.key() or b"").decode(), message.value()
        try:
            record: Any = None if value is None else json.loads(value, parse_float=Decimal)
        except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested too deep
            continue  # malformed: skipped, the key keeps its value
        if record is None:
            state.pop(key, None)
        elif (isinstance(record, dict) and not entities.errors(entity, record)
              and record.get(key_field) == key):
            state[key] = tuple(str(record[a]) for a in attributes)
    return state


def poison_changes(key_prefix: str, count: int, max_record_bytes: int
                   ) -> list[tuple[str, bytes, str]]:
    """``count`` reference records no reader may apply, each under a key of its own (so it
    shadows nothing), and the reason ingest quarantines each with: values nested deeper
    than any parser's stack (within the size limit, and far beyond it), bytes that are not
    UTF-8, and a value one byte over ``max_record_bytes``."""
    levels = (max_record_bytes - 64) // 2
    kinds = [
        (b'{"product_id": "KEY", "name": ' + b"[" * levels + b"]" * levels + b"}",
         "invalid_json"),
        (b"[" * 100_000 + b"]" * 100_000, "oversized"),
        (b'{"product_id": "KEY", "name": "caf\xe9"}', "invalid_utf8"),
        (b'{"product_id": "KEY", "name": "' + b"x" * max_record_bytes + b'"}', "oversized"),
    ]
    poison = []
    for number in range(count):
        key = f"{key_prefix}-{number:04d}"
        value, reason = kinds[number % len(kinds)]
        poison.append((key, value.replace(b"KEY", key.encode()), reason))
    return poison
