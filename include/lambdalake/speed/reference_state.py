"""The current state of the reference data the speed layer's views join, kept in its driver.

Kafka Streams' GlobalKTable, on a plain consumer: before the speed queries start, each
joined entity's compacted topic is read from its beginning to its end (the latest value
per key, deletions as tombstones), and a background thread then keeps following it. Before
a micro-batch joins, ``catch_up`` waits until the thread has applied every change the
topics held when the micro-batch began: the join is as of processing time, and a change
acknowledged before an event was sent always applies to it. A restart (a crash included)
rebuilds the state the same way, so nothing of it needs checkpointing; ``status`` gives a
digest of the state so that a rebuilt state can be compared with the one before.

Each record is checked as ingest checks it (its entity's contract, its key matching the
value's key field); a record that fails is skipped and counted, never applied, so the
speed layer joins with what the lake's current state holds. One caveat of compaction:
once the log cleaner has run, a malformed *last* record of a key has replaced the key's
last good value in the topic, so a rebuilt state lacks the key (the lake's changelog still
has it) until a good record follows.

Only the attributes some view joins are held: about a hundred bytes per key and attribute
(measured with ``bench.benchmarks.reference``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import sys
import threading
import time
import uuid
from collections import Counter
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from lambdalake.contracts.registry import EntityRegistry
from lambdalake.settings import Settings
from lambdalake.views.definition import Join

if TYPE_CHECKING:
    from confluent_kafka import Consumer, Message, TopicPartition

log = logging.getLogger(__name__)


def entry_hash(key: str, values: tuple[str, ...]) -> int:
    """One key's held attributes as 64 bits; a state's digest XORs its entries' hashes, so
    it is kept up to date in constant time per change and does not depend on their order."""
    text = "\x1f".join((key, *values)).encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big")


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
        self.digests: dict[str, int] = dict.fromkeys(self.attributes, 0)
        self.stale_joins = 0  # micro-batches that joined before the state caught up
        self._stop = threading.Event()
        self._consumer: Consumer | None = None
        self._offsets: Consumer | None = None  # asks the brokers for the topics' ends
        self._thread: threading.Thread | None = None
        self._partitions: list[TopicPartition] = []
        self._applied: dict[tuple[str, int], int] = {}  # next offset to apply, per partition
        self._progress = threading.Condition()

    def start(self, timeout: float = 300.0) -> None:
        """Read every joined topic to its current end, then follow it in the background."""
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        if not self.topics:
            return
        def consumer() -> Consumer:
            return Consumer({
                **self.settings.kafka.client_config(), "enable.auto.commit": False,
                "group.id": f"lambdalake-speed-reference-{uuid.uuid4().hex}",  # never joined
            })

        self._consumer, self._offsets = consumer(), consumer()
        metadata = self._consumer.list_topics(timeout=30)
        self._partitions = [TopicPartition(topic, number, OFFSET_BEGINNING)
                            for topic in self.topics
                            for number in metadata.topics[topic].partitions]
        self._consumer.assign(self._partitions)
        self._thread = threading.Thread(target=self._follow, name="reference-state",
                                        daemon=True)
        self._thread.start()
        if not self._applied_to_the_end(timeout):
            self.close()
            raise TimeoutError(f"reference state: its topics were not read to their end "
                               f"within {timeout:.0f}s")

    def _follow(self) -> None:
        assert self._consumer is not None
        while not self._stop.is_set():
            for message in self._consumer.consume(1000, timeout=0.2):
                self._apply(message)
            # positions skip what compaction removed; every message before them is applied
            applied = {(p.topic, p.partition): p.offset
                       for p in self._consumer.position(self._partitions)}
            with self._progress:
                self._applied = applied
                self._progress.notify_all()

    def catch_up(self, timeout: float) -> bool:
        """Wait until every change the topics hold now is applied: what a micro-batch calls
        before it joins. False (and counted as a stale join in ``status``) if that took
        longer than ``timeout`` seconds: the micro-batch then joins with what is applied."""
        if self._applied_to_the_end(timeout):
            return True
        self.stale_joins += 1
        log.warning("reference state: not caught up within %.0fs; joining with the changes "
                    "applied so far", timeout)
        return False

    def _applied_to_the_end(self, timeout: float) -> bool:
        """Whether the follower applied every change the topics hold now, within ``timeout``
        seconds."""
        if self._offsets is None:
            return True
        deadline = time.monotonic() + timeout
        ends = self._topic_ends(deadline)
        if ends is None:
            return False

        def behind() -> bool:  # a partition not fetched yet has a negative position
            return any(max(self._applied.get(p, 0), 0) < end for p, end in ends.items())

        with self._progress:
            while behind():
                left = deadline - time.monotonic()
                if left <= 0 or self._thread is None or not self._thread.is_alive():
                    return False
                self._progress.wait(min(left, 1.0))
        return True

    def _topic_ends(self, deadline: float) -> dict[tuple[str, int], int] | None:
        """Each partition's end offset now, asking again while the brokers cannot answer
        (an outage, a leader moving); None if they did not answer before ``deadline``."""
        from confluent_kafka import KafkaException

        assert self._offsets is not None
        while True:
            left = deadline - time.monotonic()
            try:
                return {(p.topic, p.partition): self._offsets.get_watermark_offsets(
                            p, timeout=max(left, 1.0), cached=False)[1]
                        for p in self._partitions}
            except KafkaException as error:
                if left <= 1.0:
                    log.warning("reference state: the topics' ends are unknown: %s", error)
                    return None
                time.sleep(1.0)

    def _apply(self, message: Message) -> None:
        entity = self.topics.get(message.topic() or "")
        if message.error() is not None or entity is None:
            return
        counts = self.counts[entity]
        raw_key = message.key()
        if raw_key is None:
            counts["skipped"] += 1
            return
        key = raw_key.decode(errors="replace")
        value = message.value()
        if value is None:
            self._hold(entity, key, None)
            counts["deleted"] += 1
            return
        record = self._valid_record(entity, key, value)
        if record is None:
            counts["skipped"] += 1
            return
        # attributes repeat across keys (a few categories, many products): one copy each
        self._hold(entity, key, tuple(sys.intern(str(record[a]))
                                      for a in self.attributes[entity]))
        counts["applied"] += 1

    def _hold(self, entity: str, key: str, values: tuple[str, ...] | None) -> None:
        """Set (or, with None, drop) ``key``'s attributes, keeping the digest current."""
        held = self.state[entity]
        old = held.pop(key, None)
        if old is not None:
            self.digests[entity] ^= entry_hash(key, old)
        if values is not None:
            held[key] = values
            self.digests[entity] ^= entry_hash(key, values)

    def _valid_record(self, entity: str, key: str, value: bytes) -> dict[str, Any] | None:
        """The record if ingest would put it in the changelog, else None. A value nested
        deeper than Python's stack allows is skipped like one that is not JSON: a topic kept
        forever would otherwise kill the follower at every start."""
        try:
            record = json.loads(value, parse_float=Decimal)
            if not self.entities.is_valid(entity, record):
                return None
        except (ValueError, RecursionError):
            return None
        return record if record.get(self.entities.latest(entity).key) == key else None

    def lookup(self, join: Join, keys: list[str | None]) -> dict[str, list[str | None]]:
        """``join``'s attributes of each key as they are now (None: no such key)."""
        held = self.state[join.entity]
        found = [held.get(key) if key is not None else None for key in keys]
        positions = [self.attributes[join.entity].index(a) for a in join.attributes]
        return {attribute: [values[at] if values else None for values in found]
                for attribute, at in zip(join.attributes, positions, strict=True)}

    def status(self) -> dict[str, Any]:
        """Per entity: keys held, changes applied, deleted and skipped, and the digest; and
        the micro-batches that joined before the state caught up."""
        return {"entities": {entity: {"keys": len(self.state[entity]), **self.counts[entity],
                                      "digest": f"{self.digests[entity]:016x}"}
                             for entity in sorted(self.state)},
                "stale_joins": self.stale_joins}

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        for consumer in (self._consumer, self._offsets):
            if consumer is not None:
                consumer.close()
        self._consumer = self._offsets = None
