"""A deterministic clickstream traffic generator for demos, tests and benchmarks.

Given a seed and an event-time base, it produces the same records in the same order every
time: valid events of every contract, **late** events (event time up to N minutes before
their place in the stream), **duplicates** (a valid event sent again, same ``event_id``)
and **malformed** records of every kind in ``MALFORMED_KINDS``. It writes a manifest with
the count of each kind and the ids of the valid events, so that whatever consumes the
topic can be reconciled record for record.

With ``reference_change_every`` set, reference data travels beside the events
(``lambdalake.generator.catalogue``): the initial catalogue first, then one change after every that
many records, valid from the event time reached there. Each change is acknowledged before
the next record is sent, so Kafka holds changes and events in the order the manifest lists
them (each change names the record it follows: ``after_record``, -1 for the catalogue).

Events travel as JSON, or (``wire_format="avro"``) as Avro in the Confluent wire format
through an encoder the caller brings (the registry's); Avro traffic has the malformed kinds
Avro can carry (``AVRO_MALFORMED_KINDS``): a JSON-only fault such as a wrong type cannot be
written with a schema.
"""

from __future__ import annotations

import itertools
import json
import random
import struct
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

from lambdalake.contracts.registry import encode_event
from lambdalake.generator.catalogue import Catalogue, Change

MALFORMED_KINDS = (
    "invalid_json",
    "wrong_type",
    "missing_required",
    "unknown_event_type",
    "oversized",
    "invalid_utf8",
    "empty_value",
    "timestamp_out_of_range",
    "constraint_violation",
)
AVRO_MALFORMED_KINDS = (
    "unknown_schema_id",
    "invalid_avro",
    "empty_value",
    "oversized",
    "timestamp_out_of_range",
    "constraint_violation",
)
UNREGISTERED_SCHEMA_ID = 2**31 - 1
Encoder = Callable[[Mapping[str, Any]], bytes]
PACING_SECONDS = 0.002
"""A paced producer sleeps once it is this far ahead of its rate, sending the records of
those 2 ms together: a sleep before every record took half its CPU at 5,000 records/s
(0.30 of a core, 0.14 with this), CPU a benchmark's stack on two cores needs."""

EVENT_MIX = (("page_view", 0.70), ("add_to_cart", 0.20), ("purchase", 0.10))
COUNTRIES = ("DE", "FR", "GB", "US", "NL", "ES", "IT", "PL")
DEVICES = ("desktop", "mobile", "tablet")
CURRENCY_OF = {"GB": "GBP", "US": "USD"}


@dataclass(frozen=True)
class TrafficProfile:
    """What to generate. Fractions are of all records produced."""

    count: int = 10_000
    rate: float = 0.0  # records per second; 0 = as fast as the broker takes them
    users: int = 1_000
    pages: int = 50
    products: int = 200
    key_skew: float = 1.1  # Zipf exponent of user activity; 0 = uniform
    late_fraction: float = 0.05
    max_lateness_minutes: float = 30.0
    duplicate_fraction: float = 0.02
    malformed_fraction: float = 0.01
    oversized_bytes: int = 100 * 1024
    seed: int = 42
    start_time: datetime | None = None  # event-time base; default: now
    # event-time seconds advance per record = 1/this; 0 = rate or 1000/s
    event_time_rate: float = 0.0
    wire_format: Literal["json", "avro"] = "json"
    reference_change_every: int = 0  # records between reference changes; 0 = no reference data

    def __post_init__(self) -> None:
        for name in ("late_fraction", "duplicate_fraction", "malformed_fraction"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"{name} must be within [0, 1]")
        if self.duplicate_fraction + self.malformed_fraction > 1:
            raise ValueError("duplicate_fraction + malformed_fraction must be at most 1")
        if self.count < 0 or self.rate < 0 or self.users < 1 or self.pages < 1 or self.products < 1:
            raise ValueError("count and rate must be >= 0; users, pages, products >= 1")
        if self.reference_change_every < 0:
            raise ValueError("reference_change_every must be >= 0")


@dataclass(frozen=True)
class Record:
    """One Kafka record to produce, and what it is."""

    kind: str  # "valid", "duplicate" or one of (AVRO_)MALFORMED_KINDS
    key: bytes | None
    value: bytes | None
    event: dict[str, Any] | None = None  # the event, for valid records and duplicates


@dataclass
class Manifest:
    """What a generator run produced: the reconciliation ground truth."""

    seed: int
    topic: str
    profile: dict[str, Any]
    counts: Counter[str] = field(default_factory=Counter)
    acknowledged: int = 0
    failed: int = 0
    valid_event_ids: list[str] = field(default_factory=list)
    reference_changes: list[dict[str, Any]] = field(default_factory=list)
    reference_acknowledged: int = 0

    @property
    def produced(self) -> int:
        return sum(self.counts.values())

    @property
    def malformed(self) -> int:
        return sum(n for kind, n in self.counts.items()
                   if kind in MALFORMED_KINDS or kind in AVRO_MALFORMED_KINDS)

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        document = {
            "seed": self.seed, "topic": self.topic, "profile": self.profile,
            "counts": dict(sorted(self.counts.items())), "produced": self.produced,
            "malformed": self.malformed, "acknowledged": self.acknowledged,
            "failed": self.failed, "valid_event_ids": self.valid_event_ids,
            "reference_changes": self.reference_changes,
            "reference_acknowledged": self.reference_acknowledged,
        }
        path.write_text(json.dumps(document, default=str))

    @classmethod
    def read(cls, path: Path) -> Manifest:
        document = json.loads(path.read_text())
        return cls(
            seed=document["seed"], topic=document["topic"], profile=document["profile"],
            counts=Counter(document["counts"]), acknowledged=document["acknowledged"],
            failed=document["failed"], valid_event_ids=document["valid_event_ids"],
            reference_changes=document.get("reference_changes", []),
            reference_acknowledged=document.get("reference_acknowledged", 0),
        )


class TrafficGenerator:
    """Yields the records of one profile, deterministically."""

    def __init__(self, profile: TrafficProfile, avro: Encoder | None = None) -> None:
        if (profile.wire_format == "avro") != (avro is not None):
            raise ValueError("an Avro encoder goes with wire_format='avro', and only with it")
        self.profile = profile
        self.encode: Encoder = avro or encode_event
        self.malformed_kinds = AVRO_MALFORMED_KINDS if avro else MALFORMED_KINDS
        self.rng = random.Random(profile.seed)
        self.start = profile.start_time or datetime.now(UTC).replace(microsecond=0)
        step_rate = profile.event_time_rate or profile.rate or 1000.0
        self.event_time_step = timedelta(seconds=1 / step_rate)
        weights = [1 / (rank ** profile.key_skew) for rank in range(1, profile.users + 1)]
        self.users = [f"user-{i:06d}" for i in range(profile.users)]
        self.user_cum_weights = list(itertools.accumulate(weights))
        self.sessions: dict[str, str] = {}
        self.countries: dict[str, str] = {}
        self.recent: deque[dict[str, Any]] = deque(maxlen=1000)

    def event_time_at(self, index: int) -> datetime:
        """The event time the stream has reached at record ``index`` (late events aside)."""
        return self.start + index * self.event_time_step

    def catalogue(self) -> Catalogue | None:
        """The run's reference data, if the profile asks for it."""
        if not self.profile.reference_change_every:
            return None
        return Catalogue(self.profile.products, self.profile.users, self.profile.seed,
                         self.start)

    def records(self) -> Iterator[Record]:
        profile, rng = self.profile, self.rng
        for index in range(profile.count):
            roll = rng.random()
            if roll < profile.malformed_fraction:
                yield self._malformed(rng.choice(self.malformed_kinds), index)
            elif roll < profile.malformed_fraction + profile.duplicate_fraction and self.recent:
                event = rng.choice(self.recent)
                yield Record("duplicate", event["user_id"].encode(), self.encode(event), event)
            else:
                event = self._event(index)
                self.recent.append(event)
                yield Record("valid", event["user_id"].encode(), self.encode(event), event)

    def _event(self, index: int) -> dict[str, Any]:
        profile, rng = self.profile, self.rng
        user = rng.choices(self.users, cum_weights=self.user_cum_weights)[0]
        if user not in self.sessions or rng.random() < 0.05:
            self.sessions[user] = f"s-{uuid.UUID(int=rng.getrandbits(128), version=4).hex[:16]}"
        occurred = self.event_time_at(index)
        if rng.random() < profile.late_fraction:
            occurred -= timedelta(minutes=rng.uniform(0, profile.max_lateness_minutes))
        event_type = rng.choices([t for t, _ in EVENT_MIX], weights=[w for _, w in EVENT_MIX])[0]
        country = self.countries.setdefault(user, rng.choice(COUNTRIES))
        event: dict[str, Any] = {
            "event_id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            "event_type": event_type,
            "user_id": user,
            "session_id": self.sessions[user],
            "occurred_at": occurred.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "schema_version": 1,
            "country": country,
            "device": rng.choice(DEVICES),
        }
        if event_type == "page_view":
            event["page"] = f"/page/{rng.randrange(profile.pages)}"
        else:
            event["product_id"] = f"product-{rng.randrange(profile.products):04d}"
            event["quantity"] = rng.randint(1, 5)
        if event_type == "purchase":
            event["amount"] = Decimal(rng.randint(100, 50_000)) / 100
            event["currency"] = CURRENCY_OF.get(country, "EUR")
        return event

    def _malformed(self, kind: str, index: int) -> Record:
        event = self._event(index)
        key = event["user_id"].encode()
        if kind == "unknown_schema_id":
            body = self.encode(event)[5:]
            return Record(kind, key, b"\x00" + struct.pack(">I", UNREGISTERED_SCHEMA_ID) + body)
        if kind == "invalid_avro":  # cut in the middle of its fields
            framed = self.encode(event)
            return Record(kind, key, framed[:5 + (len(framed) - 5) // 2])
        if kind == "invalid_json":
            return Record(kind, key, encode_event(event)[:-7] + b',"oops')
        if kind == "wrong_type":
            field_name = self.rng.choice(["schema_version", "occurred_at", "event_id"])
            event[field_name] = {"schema_version": "one", "occurred_at": 12345,
                                 "event_id": 42}[field_name]
        elif kind == "missing_required":
            del event[self.rng.choice(["event_id", "user_id", "occurred_at", "country"])]
        elif kind == "unknown_event_type":
            event["event_type"] = "refund"
        elif kind == "oversized":  # Avro writes only the schema's fields
            event["session_id" if self.profile.wire_format == "avro" else "padding"] = (
                "x" * self.profile.oversized_bytes)
        elif kind == "invalid_utf8":
            return Record(kind, key, encode_event(event).replace(b'"device"', b'"dev\xff\xfe"'))
        elif kind == "empty_value":
            return Record(kind, key, None if index % 2 else b"")
        elif kind == "timestamp_out_of_range":
            event["occurred_at"] = self.rng.choice(
                ["1999-12-31T23:59:59.000Z", "2199-01-01T00:00:00.000Z"]
            )
        elif kind == "constraint_violation":
            event["device"] = "smart-fridge"
        return Record(kind, key, self.encode(event))


def produce_traffic(
    generator: TrafficGenerator, producer: Any, progress: bool = False,
    stop_requested: list[int] | None = None, reference: Mapping[str, Any] | None = None,
) -> Manifest:
    """Send every record of ``generator`` through ``producer`` at the profile's rate, and the
    reference changes (if the profile has them) through ``reference``'s producer of each
    entity's topic. The manifest counts this call's deliveries: a producer may have sent
    before (a benchmark's warm-up), and its counts are its lifetime's."""
    profile = generator.profile
    manifest = Manifest(seed=profile.seed, topic=producer.topic,
                        profile=asdict(profile))
    catalogue = generator.catalogue()
    producers: Mapping[str, Any] = reference or {}
    before = {name: (p.counts.acknowledged, p.counts.failed)
              for name, p in [("", producer), *producers.items()]}
    if catalogue is not None and not producers:
        raise ValueError("the profile has reference data: pass a producer per entity")

    def send_change(change: Change, after_record: int) -> None:
        producers[change.entity].send(change.key.encode(), change.encoded(),
                                      headers=change.headers())
        manifest.reference_changes.append({**change.as_manifest(),
                                           "after_record": after_record})

    def changes_acknowledged() -> None:  # before the records that follow them are sent
        for entity_producer in producers.values():
            entity_producer.flush()

    for change in catalogue.initial() if catalogue is not None else ():
        send_change(change, -1)
    changes_acknowledged()
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=profile.count, unit="rec", unit_scale=True, smoothing=0.1)
    started = time.monotonic()
    for index, record in enumerate(generator.records()):
        if stop_requested:
            break
        if profile.rate:
            ahead = index / profile.rate - (time.monotonic() - started)
            if ahead >= PACING_SECONDS:
                time.sleep(ahead)
        producer.send(record.key, record.value)
        manifest.counts[record.kind] += 1
        if record.kind == "valid":
            manifest.valid_event_ids.append(record.event["event_id"])  # type: ignore[index]
        if catalogue is not None and index % profile.reference_change_every == 0 and index:
            send_change(catalogue.change(generator.event_time_at(index)), index)
            changes_acknowledged()
        if bar is not None and index % 1000 == 999:
            bar.update(1000)
    producer.flush()
    for entity, entity_producer in producers.items():
        entity_producer.flush()
        manifest.reference_acknowledged += entity_producer.counts.acknowledged - before[entity][0]
    if bar is not None:
        bar.update(manifest.produced - bar.n)
        bar.close()
    manifest.acknowledged = producer.counts.acknowledged - before[""][0]
    manifest.failed = sum(p.counts.failed - before[name][1]
                          for name, p in [("", producer), *producers.items()])
    return manifest
