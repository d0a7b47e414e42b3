"""The current state of the reference data the speed layer's views join, kept in its driver.

Kafka Streams' GlobalKTable, on a plain consumer: before the speed queries start, each
joined entity's compacted topic is read from its beginning to its end (the latest value
per key, deletions as tombstones), and a background thread then keeps following it, so a
micro-batch joins with the state as of its processing time. A restart (a crash included)
rebuilds the state the same way, so nothing of it needs checkpointing.

Each record is checked as ingest checks it (its entity's contract, its key matching the
value's key field); a record that fails is skipped and counted, never applied, so the
speed layer joins with what the lake's current state holds. One caveat of compaction:
once the log cleaner has run, a malformed *last* record of a key has replaced the key's
last good value in the topic, so a rebuilt state lacks the key (the lake's changelog still
has it) until a good record follows.

Only the attributes some view joins are held: about a hundred bytes per key and attribute
(measured with ``bench.reference``).
"""

from __future__ import annotations

import json
import sys
import threading
import time
import uuid
from collections import Counter
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from lambdalake.contracts import EntityRegistry
from lambdalake.settings import Settings
from lambdalake.views.definition import Join

if TYPE_CHECKING:
    from confluent_kafka import Consumer, Message


class CurrentReference:
    """The joined entities' current attributes per key, kept from their compacted topics."""

    def __init__(self, settings: Settings, joins: list[Join],
                 entities: EntityRegistry | None = None) -> None:
        self.settings = settings
        self.entities = entities or EntityRegistry()
        self.attributes: dict[str, list[str]] = {}
        for join in joins:
            held = self.attributes.setdefault(join.entity, [])
            held += [a for a in join.attributes if a not in held]
        self.topics = {settings.kafka.entity_topic(e).name: e for e in self.attributes}
        self.state: dict[str, dict[str, tuple[str, ...]]] = {e: {} for e in self.attributes}
        self.counts: dict[str, Counter[str]] = {e: Counter() for e in self.attributes}
        self._stop = threading.Event()
        self._consumer: Consumer | None = None
        self._thread: threading.Thread | None = None

    def start(self, timeout: float = 300.0) -> None:
        """Read every joined topic to its current end, then follow it in the background."""
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        if not self.topics:
            return
        consumer = Consumer({
            **self.settings.kafka.client_config(), "enable.auto.commit": False,
            "group.id": f"lambdalake-speed-reference-{uuid.uuid4().hex}",  # never joined
        })
        metadata = consumer.list_topics(timeout=30)
        partitions = [TopicPartition(topic, number, OFFSET_BEGINNING) for topic in self.topics
                      for number in metadata.topics[topic].partitions]
        ends = {(p.topic, p.partition): consumer.get_watermark_offsets(p, timeout=30)[1]
                for p in partitions}
        consumer.assign(partitions)
        deadline = time.monotonic() + timeout
        while True:
            for message in consumer.consume(10_000, timeout=0.5):
                self._apply(message)
            behind = [p for p in consumer.position(partitions)
                      if p.offset < ends[(p.topic, p.partition)]]
            if not behind:
                break
            if time.monotonic() > deadline:
                consumer.close()
                raise TimeoutError(f"reference state: {len(behind)} partitions not read to "
                                   f"their end within {timeout:.0f}s")
        self._consumer = consumer
        self._thread = threading.Thread(target=self._follow, name="reference-state",
                                        daemon=True)
        self._thread.start()

    def _follow(self) -> None:
        assert self._consumer is not None
        while not self._stop.is_set():
            for message in self._consumer.consume(1000, timeout=0.5):
                self._apply(message)

    def _apply(self, message: Message) -> None:
        entity = self.topics.get(message.topic() or "")
        if message.error() is not None or entity is None:
            return
        counts, held = self.counts[entity], self.state[entity]
        raw_key = message.key()
        if raw_key is None:
            counts["skipped"] += 1
            return
        key = raw_key.decode(errors="replace")
        value = message.value()
        if value is None:
            held.pop(key, None)
            counts["deleted"] += 1
            return
        record = self._valid_record(entity, key, value)
        if record is None:
            counts["skipped"] += 1
            return
        # attributes repeat across keys (a few categories, many products): one copy each
        held[key] = tuple(sys.intern(str(record[a])) for a in self.attributes[entity])
        counts["applied"] += 1

    def _valid_record(self, entity: str, key: str, value: bytes) -> dict[str, Any] | None:
        """The record if ingest would put it in the changelog, else None."""
        try:
            record = json.loads(value, parse_float=Decimal)
        except ValueError:
            return None
        if not isinstance(record, dict) or self.entities.errors(entity, record):
            return None
        return record if record.get(self.entities.latest(entity).key) == key else None

    def lookup(self, join: Join, keys: list[str | None]) -> dict[str, list[str | None]]:
        """``join``'s attributes of each key as they are now (None: no such key)."""
        held = self.state[join.entity]
        found = [held.get(key) if key is not None else None for key in keys]
        positions = [self.attributes[join.entity].index(a) for a in join.attributes]
        return {attribute: [values[at] if values else None for values in found]
                for attribute, at in zip(join.attributes, positions, strict=True)}

    def status(self) -> dict[str, dict[str, int]]:
        return {entity: {"keys": len(self.state[entity]), **self.counts[entity]}
                for entity in sorted(self.state)}

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._consumer is not None:
            self._consumer.close()
