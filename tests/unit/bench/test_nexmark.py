"""The Nexmark generator: the same stream for a seed, every event valid against the domain's
contracts, and the reference generator's shape (Beam's ``GeneratorConfig`` defaults): 1
person, 3 auctions and 46 bids in every 50 events, hot auctions in half the bids, hot
bidders in three of four, hot channels in half, log-uniform prices from 1 to 1,000,000
dollars, and events of about the reference's average sizes."""

from __future__ import annotations

import json
import math
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bench.nexmark.domain import contracts
from bench.nexmark.generator import NexmarkConfig, NexmarkGenerator
from bench.nexmark.produce import event_key

CONFIG = NexmarkConfig(seed=5, events=20_000)


@pytest.fixture(scope="module")
def events() -> list[dict[str, Any]]:
    return list(NexmarkGenerator(CONFIG).events())


def of(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [event for event in events if event["event_type"] == kind]


def test_a_seed_gives_the_same_stream_and_another_seed_another(
    events: list[dict[str, Any]],
) -> None:
    assert list(NexmarkGenerator(CONFIG).events()) == events
    other = list(NexmarkGenerator(NexmarkConfig(seed=6, events=20_000)).events())
    assert [e["price"] for e in of(other, "bid")] != [e["price"] for e in of(events, "bid")]


def test_every_event_is_valid_against_its_contract(events: list[dict[str, Any]]) -> None:
    registry = contracts()
    assert {e["event_type"] for e in events} == set(registry.event_types)
    assert [(e["event_id"], registry.errors(e)) for e in events if registry.errors(e)] == []
    assert len({e["event_id"] for e in events}) == len(events)


def test_one_person_three_auctions_and_46_bids_in_every_50_events(
    events: list[dict[str, Any]],
) -> None:
    assert Counter(e["event_type"] for e in events) == {"person": 400, "auction": 1_200,
                                                        "bid": 18_400}
    assert [e["event_type"] for e in events[:5]] == ["person", "auction", "auction",
                                                      "auction", "bid"]


def test_persons_and_auctions_have_dense_ids_from_1000(events: list[dict[str, Any]]) -> None:
    assert [e["id"] for e in of(events, "person")] == list(range(1000, 1400))
    assert [e["id"] for e in of(events, "auction")] == list(range(1000, 2200))


def test_hot_auctions_bidders_and_channels_in_the_references_shares(
    events: list[dict[str, Any]],
) -> None:
    bids = of(events, "bid")
    # a hot auction is the newest multiple of 100 (of the 0-based id), a hot bidder the newest
    # person of a multiple of 100, plus one; an auction or a person drawn at random is one
    # of those now and then too (about one in a hundred), and a share of 18,400 bids varies
    # by about 0.004
    hot_auction = sum((e["auction"] - 1000) % 100 == 0 for e in bids) / len(bids)
    hot_bidder = sum((e["bidder"] - 1000) % 100 == 1 for e in bids) / len(bids)
    hot_channel = sum(e["channel"] in ("Google", "Facebook", "Baidu", "Apple")
                      for e in bids) / len(bids)
    assert 0.49 < hot_auction < 0.53
    assert 0.74 < hot_bidder < 0.78
    assert 0.48 < hot_channel < 0.52
    assert all(e["url"].startswith("https://www.nexmark.com/") for e in bids)
    hot_seller = sum((e["seller"] - 1000) % 100 == 0 for e in of(events, "auction"))
    assert 0.70 < hot_seller / 1_200 < 0.80


def test_prices_are_log_uniform_from_one_to_a_million_dollars(
    events: list[dict[str, Any]],
) -> None:
    prices = [e["price"] for e in of(events, "bid")]
    assert 100 <= min(prices) and max(prices) <= 100_000_000
    decades = Counter(min(5, int(math.log10(price / 100))) for price in prices)
    assert all(abs(decades[d] / len(prices) - 1 / 6) < 0.02 for d in range(6)), decades
    assert all(a["reserve"] > a["initial_bid"] for a in of(events, "auction"))


def test_events_have_about_the_references_average_sizes(events: list[dict[str, Any]]) -> None:
    """The reference pads a person to 200 bytes, an auction to 500, a bid to 100 on
    average (strings by their length, numbers 8 bytes each)."""
    def size(event: dict[str, Any]) -> int:
        body = {k: v for k, v in event.items()
                if k not in ("event_id", "event_type", "occurred_at", "schema_version")}
        return sum(len(v) if isinstance(v, str) else 8 for v in body.values())
    for kind, average in (("person", 200), ("auction", 500)):
        sizes = [size(e) for e in of(events, kind)]
        assert abs(sum(sizes) / len(sizes) / average - 1) < 0.05, kind
    bids = [size(e) for e in of(events, "bid")]
    assert 100 <= sum(bids) / len(bids) < 115  # a bid's URL alone can exceed 100 bytes


def test_event_time_advances_at_the_rate_and_an_auction_expires_after_it_starts(
    events: list[dict[str, Any]],
) -> None:
    def at(event: dict[str, Any]) -> datetime:
        return datetime.fromisoformat(event["occurred_at"])
    # 10,000 events per second: 20,000 events take two seconds of event time
    # fixed date: the generator's default start, only compared with the events' times
    assert at(events[0]) == CONFIG.start == datetime(2026, 12, 1, tzinfo=UTC)
    assert at(events[-1]) == CONFIG.start + timedelta(milliseconds=1999)
    assert all(at(a) < datetime.fromisoformat(a["expires"]) for a in of(events, "auction"))


def test_a_bid_is_keyed_by_its_auction_and_a_person_by_its_id(
    events: list[dict[str, Any]],
) -> None:
    bid, person = of(events, "bid")[0], of(events, "person")[0]
    assert event_key(bid) == str(bid["auction"])
    assert event_key(person) == str(person["id"])
    assert json.loads(json.dumps(bid)) == bid
