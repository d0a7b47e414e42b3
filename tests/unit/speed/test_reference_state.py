from dataclasses import dataclass
from decimal import Decimal

import pyarrow as pa

from lambdalake.contracts.registry import encode_event
from lambdalake.settings import Settings
from lambdalake.speed.reference_state import CurrentReference, entry_hash
from lambdalake.views.definition import ViewDefinition
from lambdalake.views.enrichment import as_of_now

PRODUCTS = "lambdalake.reference.product"


@dataclass
class Message:
    """What the state reads of a Kafka record."""

    key_bytes: bytes | None
    value_bytes: bytes | None
    topic_name: str = PRODUCTS

    def error(self) -> None:
        return None

    def topic(self) -> str:
        return self.topic_name

    def key(self) -> bytes | None:
        return self.key_bytes

    def value(self) -> bytes | None:
        return self.value_bytes


def product(key: str, category: str, **changes: object) -> bytes:
    return encode_event({"entity": "product", "schema_version": 1, "product_id": key,
                         "name": "Kettle", "category": category, "brand": "acme",
                         "list_price": Decimal("9.99"), "updated_at": "2026-11-23T06:00:00.000Z",
                         **changes})


VIEW = ViewDefinition.model_validate({
    "name": "units_by_category", "description": "Units per category.",
    "event_types": ["purchase"], "grain": "1 hour", "lateness": "10 minutes",
    "dimensions": ["category"], "measures": [{"name": "units", "kind": "sum", "column": "quantity"}],
    "joins": [{"entity": "product", "key": "product_id", "attributes": ["category"]}],
})


def test_the_state_applies_good_changes_and_deletions_and_skips_bad_ones() -> None:
    state = CurrentReference(Settings(), VIEW.joins)
    for message in [
        Message(b"p1", product("p1", "toys")),
        Message(b"p2", product("p2", "books")),
        Message(b"p1", product("p1", "garden")),                        # a re-categorisation
        Message(b"p2", None),                                           # a deletion
        Message(b"p1", product("p1", "weapons")),                       # not in the contract
        Message(b"p1", product("p9", "toys")),                          # another key's value
        Message(b"p1", b'{"entity": "product", "oops'),                 # not JSON
        Message(b"p3", product("p3", "toys", list_price=Decimal("-1"))),  # breaks a constraint
        Message(b"p4", b'{"product_id": "p4", "name": ' + b"[" * 100_000 + b"]" * 100_000
                + b"}"),                                                # nested past Python's stack
    ]:
        state._apply(message)
    assert state.lookup(VIEW.joins[0], ["p1", "p2", "p3", None]) == {
        "category": ["garden", None, None, None]}
    assert state.status() == {"entities": {"product": {
        "keys": 1, "applied": 3, "deleted": 1, "skipped": 5,
        "digest": f"{entry_hash('p1', ('garden',)):016x}"}}, "stale_joins": 0}


def test_the_digest_depends_on_what_is_held_not_on_how_it_got_there() -> None:
    direct, roundabout = (CurrentReference(Settings(), VIEW.joins) for _ in range(2))
    for message in [Message(b"p1", product("p1", "toys")), Message(b"p2", product("p2", "toys"))]:
        direct._apply(message)
    for message in [Message(b"p2", product("p2", "toys")), Message(b"p3", product("p3", "toys")),
                    Message(b"p1", product("p1", "books")), Message(b"p3", None),
                    Message(b"p1", product("p1", "toys"))]:
        roundabout._apply(message)
    assert direct.state == roundabout.state
    assert direct.status()["entities"]["product"]["digest"] == (
        roundabout.status()["entities"]["product"]["digest"])
    roundabout._apply(Message(b"p2", product("p2", "books")))
    assert direct.digests != roundabout.digests


def test_events_take_the_current_attributes_and_unknown_keys_the_unknown_member() -> None:
    state = CurrentReference(Settings(), VIEW.joins)
    state._apply(Message(b"p1", product("p1", "toys")))
    events = pa.table({"product_id": ["p1", "p2", None], "quantity": [1, 2, 3]})
    enriched = as_of_now(events, VIEW, state.lookup)
    assert enriched.column("category").to_pylist() == ["toys", "unknown", "unknown"]
    assert enriched.column("quantity").to_pylist() == [1, 2, 3]


def test_brokers_that_cannot_say_where_the_topics_end_make_a_stale_join_not_a_crash() -> None:
    """A broker outage during a micro-batch must not fail the speed query (a CI run of the
    broker-restart test found it did): the micro-batch joins with what is applied."""
    from confluent_kafka import Consumer, TopicPartition

    state = CurrentReference(Settings(), VIEW.joins)
    state._offsets = Consumer({"bootstrap.servers": "127.0.0.1:9", "group.id": "unreachable"})
    state._partitions = [TopicPartition(PRODUCTS, 0)]
    try:
        assert state.catch_up(timeout=2.0) is False
    finally:
        state.close()
    assert state.status()["stale_joins"] == 1
