import json
import time
from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from lambdalake.contracts.registry import ContractRegistry, EntityRegistry, encode_event
from lambdalake.generator.catalogue import REFERENCE_MALFORMED_KINDS
from lambdalake.generator.traffic import (
    AVRO_MALFORMED_KINDS,
    MALFORMED_KINDS,
    PACING_SECONDS,
    UNREGISTERED_SCHEMA_ID,
    Manifest,
    TrafficGenerator,
    TrafficProfile,
    produce_traffic,
)

START = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


def test_same_seed_same_records() -> None:
    profile = TrafficProfile(count=3000, seed=5, start_time=START, malformed_fraction=0.05)
    first = [(r.key, r.value) for r in TrafficGenerator(profile).records()]
    again = [(r.key, r.value) for r in TrafficGenerator(profile).records()]
    other = [(r.key, r.value) for r in TrafficGenerator(
        TrafficProfile(count=3000, seed=6, start_time=START, malformed_fraction=0.05)).records()]
    assert first == again != other


def test_fractions_kinds_and_validity() -> None:
    profile = TrafficProfile(count=20_000, seed=1, start_time=START, malformed_fraction=0.1,
                             duplicate_fraction=0.05, late_fraction=0.2, max_lateness_minutes=30)
    records = list(TrafficGenerator(profile).records())
    kinds = Counter(r.kind for r in records)
    assert set(kinds) == {"valid", "duplicate", *MALFORMED_KINDS}
    assert 0.08 < sum(kinds[k] for k in MALFORMED_KINDS) / 20_000 < 0.12
    assert 0.04 < kinds["duplicate"] / 20_000 < 0.06
    registry = ContractRegistry()
    valid = [r for r in records if r.kind in ("valid", "duplicate")]
    assert all(registry.errors(r.event) == [] for r in valid[:3000])
    ids = [r.event["event_id"] for r in valid if r.kind == "valid"]
    assert len(ids) == len(set(ids))
    assert {r.event["event_id"] for r in valid if r.kind == "duplicate"} <= set(ids)
    times = [datetime.fromisoformat(r.event["occurred_at"]) for r in valid if r.kind == "valid"]
    late = [t for i, t in enumerate(times[1:], 1) if t < times[i - 1]]
    assert 0.1 < len(late) / len(times) < 0.3  # late events arrive out of event-time order


def fake_avro(event: object) -> bytes:
    """Framed like the Confluent wire format (magic byte, schema id 7); the body is JSON."""
    return b"\x00\x00\x00\x00\x07" + encode_event(event)


def test_avro_traffic_has_the_faults_avro_can_carry_and_the_same_events() -> None:
    json_profile = TrafficProfile(count=5000, seed=3, start_time=START, malformed_fraction=0.3)
    avro_profile = replace(json_profile, wire_format="avro")
    records = list(TrafficGenerator(avro_profile, avro=fake_avro).records())
    assert {r.kind for r in records} == {"valid", "duplicate", *AVRO_MALFORMED_KINDS}
    by_kind = {r.kind: r for r in reversed(records)}
    assert by_kind["unknown_schema_id"].value[:5] == b"\x00" + UNREGISTERED_SCHEMA_ID.to_bytes(4, "big")
    cut = by_kind["invalid_avro"].value
    assert cut.startswith(b"\x00\x00\x00\x00\x07{") and not cut.endswith(b"}")  # cut short
    assert len(by_kind["oversized"].value) > avro_profile.oversized_bytes
    assert all(r.value == fake_avro(r.event) for r in records if r.kind == "valid")
    manifest = produce_traffic(TrafficGenerator(avro_profile, avro=fake_avro), CountingProducer())
    assert manifest.malformed == sum(manifest.counts[k] for k in AVRO_MALFORMED_KINDS) > 0
    with pytest.raises(ValueError, match="Avro encoder goes with wire_format='avro'"):
        TrafficGenerator(json_profile, avro=fake_avro)
    with pytest.raises(ValueError, match="Avro encoder"):
        TrafficGenerator(avro_profile)


def test_bad_profiles_are_rejected() -> None:
    with pytest.raises(ValueError, match="malformed_fraction"):
        TrafficProfile(malformed_fraction=1.5)
    with pytest.raises(ValueError, match="at most 1"):
        TrafficProfile(malformed_fraction=0.6, duplicate_fraction=0.6)


class CountingProducer:
    topic = "t"

    def __init__(self, journal: list[str] | None = None, name: str = "events") -> None:
        self.sent: list[tuple] = []
        self.journal = [] if journal is None else journal  # sends and flushes, in order
        self.name = name

        class Counts:
            acknowledged = 0
            failed = 0

        self.counts = Counts()
        self.sends_to_fail = 0  # the next sends the broker refuses

    def send(self, key, value, headers=None) -> None:
        self.sent.append((key, value, headers))
        if self.sends_to_fail:
            self.sends_to_fail -= 1
            self.counts.failed += 1
        else:
            self.counts.acknowledged += 1
        self.journal.append(f"send {self.name}")

    def flush(self) -> int:
        self.journal.append(f"flush {self.name}")
        return 0


class TimedProducer(CountingProducer):
    def __init__(self) -> None:
        super().__init__()
        self.sent_at: list[float] = []

    def send(self, key, value, headers=None) -> None:
        self.sent_at.append(time.monotonic())
        super().send(key, value, headers)


def test_a_paced_producer_keeps_its_rate_with_a_sleep_per_pacing_step(
        monkeypatch: pytest.MonkeyPatch) -> None:
    rate, count = 10_000, 1_000  # 0.1 s
    sleeps: list[float] = []
    real_sleep = time.sleep

    def counted_sleep(seconds: float) -> None:
        sleeps.append(seconds)
        real_sleep(seconds)

    monkeypatch.setattr(time, "sleep", counted_sleep)
    producer = TimedProducer()
    started = time.monotonic()
    produce_traffic(TrafficGenerator(TrafficProfile(count=count, rate=rate, seed=4)), producer)
    early = [index / rate - (at - started) for index, at in enumerate(producer.sent_at)]
    assert len(producer.sent_at) == count
    assert max(early) <= PACING_SECONDS  # never further ahead of the rate than one step
    assert producer.sent_at[-1] - started >= (count - 1) / rate - PACING_SECONDS
    assert len(sleeps) <= (count / rate) / PACING_SECONDS + 1  # not one per record


def test_manifest_reconciles_and_round_trips(tmp_path: Path) -> None:
    producer = CountingProducer()
    profile = TrafficProfile(count=5000, seed=2, start_time=START, malformed_fraction=0.1)
    manifest = produce_traffic(TrafficGenerator(profile), producer)
    assert manifest.produced == len(producer.sent) == manifest.acknowledged == 5000
    assert manifest.counts["valid"] == len(manifest.valid_event_ids)
    manifest.write(tmp_path / "m.json")
    again = Manifest.read(tmp_path / "m.json")
    assert again.counts == manifest.counts and again.valid_event_ids == manifest.valid_event_ids
    assert again.malformed == manifest.malformed > 0


def test_a_manifest_counts_its_own_deliveries_on_a_producer_that_sent_before() -> None:
    """A benchmark warms its stack up with the producer it then measures with."""
    producer = CountingProducer()
    reference = {entity: CountingProducer(name=entity) for entity in ("product", "user_profile")}
    profile = TrafficProfile(count=2000, seed=2, start_time=START, users=300, products=50,
                             event_time_rate=5, reference_change_every=100)
    producer.sends_to_fail = reference["product"].sends_to_fail = 1
    warm_up = produce_traffic(TrafficGenerator(profile), producer, reference=reference)
    producer.sends_to_fail = reference["user_profile"].sends_to_fail = 2
    measured = produce_traffic(TrafficGenerator(replace(profile, seed=3)), producer,
                               reference=reference)
    assert (warm_up.acknowledged, warm_up.failed) == (1999, 2)
    assert (measured.produced, measured.acknowledged, measured.failed) == (2000, 1998, 4)
    assert measured.reference_acknowledged == len(measured.reference_changes) - 2 > 0


def test_reference_changes_travel_beside_the_events_inside_their_hours(tmp_path: Path) -> None:
    journal: list[str] = []
    events = CountingProducer(journal)
    reference = {entity: CountingProducer(journal, entity) for entity in ("product",
                                                                          "user_profile")}
    profile = TrafficProfile(count=20_000, seed=4, start_time=START, users=300, products=50,
                             event_time_rate=5, reference_change_every=40)
    manifest = produce_traffic(TrafficGenerator(profile), events, reference=reference)
    plain = CountingProducer()
    produce_traffic(TrafficGenerator(replace(profile, reference_change_every=0)), plain)
    assert events.sent == plain.sent  # the events are the same with reference data or without

    changes = manifest.reference_changes
    assert len(changes) == manifest.reference_acknowledged == sum(
        len(p.sent) for p in reference.values())
    assert set(Counter(c["kind"] for c in changes)) == {
        "initial", "price_change", "recategorisation", "new_product", "product_deletion",
        "segment_change", "new_profile", *REFERENCE_MALFORMED_KINDS}
    initial = [c for c in changes if c["kind"] == "initial"]
    assert {c["key"] for c in initial if c["entity"] == "product"} == {
        f"product-{n:04d}" for n in range(50)}
    assert 0.8 < sum(c["entity"] == "user_profile" for c in initial) / 300 < 1.0
    later = [datetime.fromisoformat(c["updated_at"]) for c in changes if c["kind"] != "initial"]
    assert START < min(later) and max(later) < START + timedelta(seconds=20_000 / 5)
    assert [c["after_record"] for c in changes] == [-1] * len(initial) + list(
        range(40, 20_000, 40))
    # every change is acknowledged (its producer flushed) before the next event is sent
    for at, entry in enumerate(journal):
        if entry.startswith("send ") and entry != "send events":
            following = journal[at + 1:]
            next_event = following.index("send events") if "send events" in following else None
            assert f"flush {entry[5:]}" in following[:next_event], at

    entities = EntityRegistry()
    for entity, producer in reference.items():
        mine = [c for c in changes if c["entity"] == entity]
        assert [k.decode() for k, _, _ in producer.sent] == [c["key"] for c in mine]
        for (key, value, headers), change in zip(producer.sent, mine, strict=True):
            if change["kind"] == "product_deletion":  # a tombstone, its time in a header
                assert value is None and change["value"] is None
                assert headers == {"updated_at": change["updated_at"].encode()}
                continue
            assert not headers
            try:
                record = json.loads(value, parse_float=Decimal)
                problems = entities.errors(entity, record)
                problems += [] if record[entities.latest(entity).key] == key.decode() else ["key"]
            except ValueError:
                problems = ["not JSON"]
            assert bool(problems) == (change["kind"] in REFERENCE_MALFORMED_KINDS), change

    manifest.write(tmp_path / "m.json")
    assert Manifest.read(tmp_path / "m.json").reference_changes == changes


def test_reference_data_needs_its_producers() -> None:
    profile = TrafficProfile(count=10, start_time=START, reference_change_every=5)
    with pytest.raises(ValueError, match="producer per entity"):
        produce_traffic(TrafficGenerator(profile), CountingProducer())
