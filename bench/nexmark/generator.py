"""A deterministic Nexmark generator: persons, auctions and bids of an online auction.

It follows the reference generator (Apache Beam's ``NexmarkGenerator`` and its
``PersonGenerator``, ``AuctionGenerator``, ``BidGenerator``, as the nexmark/nexmark repository
ports them to Flink) in what the queries depend on:

* event ``n`` is a person, an auction or a bid by ``n mod 50``: 1 person, 3 auctions, 46
  bids in every 50 events;
* ids are dense and start at 1000 (persons and auctions); a bid names one of the four hot
  auctions in two (the newest multiple of 100), else an auction in flight (one of the last
  100, or up to 10 ahead); a bidder is a hot bidder (a multiple of 100, plus 1) in three of
  four, else one of the 1,000 active persons (or up to 10 ahead); a seller is hot (a
  multiple of 100) in three of four;
* prices are ``round(10 ** (6 u) * 100)`` cents, ``u`` uniform in [0, 1): log-uniform from
  1.00 to 1,000,000.00; an auction's reserve is its initial bid plus another such price;
* a bid's channel is one of the four hot channels (Google, Facebook, Baidu, Apple, each with
  its URL) in half the bids, else ``channel-<n>`` of 10,000 with a URL naming it;
* five categories from 10; names, e-mail addresses, cities, states and credit-card numbers
  from the reference's lists and shapes; ``extra`` pads each event to the reference's
  average size (person 200, auction 500, bid 100 bytes);
* event time advances by the inter-event delay of a fixed rate (the reference's default:
  10,000 events per second), in milliseconds; an auction expires within twice the time
  the next 100 auctions take to be created.

It draws from Python's ``random.Random(seed)``, not Java's ``java.util.Random``: the same
distributions, not the same sequence. Rate shapes (sine, square) and out-of-order delays
of the reference are left out: every event is in time order.
"""

from __future__ import annotations

import random
import string
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

PROPORTIONS = {"person": 1, "auction": 3, "bid": 46}
TOTAL_PROPORTION = sum(PROPORTIONS.values())
FIRST_PERSON_ID = 1000
FIRST_AUCTION_ID = 1000
FIRST_CATEGORY_ID = 10
NUM_CATEGORIES = 5
HOT_AUCTION_RATIO = 100
HOT_SELLER_RATIO = 100
HOT_BIDDER_RATIO = 100
HOT_AUCTIONS = 2  # a bid is on a hot auction unless randint(0, 1) is 0: one in two
HOT_SELLERS = 4  # three in four
HOT_BIDDERS = 4  # three in four
NUM_ACTIVE_PEOPLE = 1000
NUM_IN_FLIGHT_AUCTIONS = 100
PERSON_ID_LEAD = 10
AUCTION_ID_LEAD = 10
HOT_CHANNELS = ("Google", "Facebook", "Baidu", "Apple")
HOT_CHANNELS_RATIO = 2
CHANNELS_NUMBER = 10_000
AVERAGE_SIZE = {"person": 200, "auction": 500, "bid": 100}
FIRST_NAMES = ("Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah",
               "Deiter", "Walter")
LAST_NAMES = ("Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones",
              "Noris")
US_STATES = ("AZ", "CA", "ID", "OR", "WA", "WY")
US_CITIES = ("Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend",
             "Redmond", "Seattle", "Kent", "Cheyenne")
MIN_STRING_LENGTH = 3
SCHEMA_VERSION = 1


def event_kind(number: int) -> str:
    """Which kind event ``number`` is: 1 person, then 3 auctions, then 46 bids in every 50."""
    offset = number % TOTAL_PROPORTION
    if offset < PROPORTIONS["person"]:
        return "person"
    return "auction" if offset < PROPORTIONS["person"] + PROPORTIONS["auction"] else "bid"


def last_base0_person_id(number: int) -> int:
    """The 0-based id of the newest person at event ``number`` (the reference's
    ``lastBase0PersonId``)."""
    epoch, offset = divmod(number, TOTAL_PROPORTION)
    return epoch * PROPORTIONS["person"] + min(offset, PROPORTIONS["person"] - 1)


def last_base0_auction_id(number: int) -> int:
    """The 0-based id of the newest auction at event ``number`` (``lastBase0AuctionId``)."""
    epoch, offset = divmod(number, TOTAL_PROPORTION)
    if offset < PROPORTIONS["person"]:  # no auction yet in this epoch: the last one of the previous
        epoch, offset = epoch - 1, PROPORTIONS["auction"] - 1
    elif offset >= PROPORTIONS["person"] + PROPORTIONS["auction"]:
        offset = PROPORTIONS["auction"] - 1
    else:
        offset -= PROPORTIONS["person"]
    return epoch * PROPORTIONS["auction"] + offset


def next_price(rng: random.Random) -> int:
    """A price in cents, log-uniform from 100 to 100,000,000 (``nextPrice``)."""
    return int(round(10.0 ** (rng.random() * 6.0) * 100.0))


def next_string(rng: random.Random, max_length: int, special: str = " ") -> str:
    """Lower-case letters with one ``special`` in 13, 3 to ``max_length - 1`` long, trimmed
    (``nextString``)."""
    length = MIN_STRING_LENGTH + rng.randrange(max_length - MIN_STRING_LENGTH)
    return "".join(special if rng.randrange(13) == 0 else rng.choice(string.ascii_lowercase)
                   for _ in range(length)).strip()


def next_exact_string(rng: random.Random, length: int) -> str:
    """Exactly ``length`` characters, a space in 13 (``nextExactString``)."""
    return "".join(" " if rng.randrange(13) == 0 else rng.choice(string.ascii_lowercase)
                   for _ in range(length))


def next_extra(rng: random.Random, current_size: int, desired_average: int) -> str:
    """Padding that brings an event of ``current_size`` bytes to ``desired_average`` on
    average, give or take 20 % (``nextExtra``)."""
    if current_size > desired_average:
        return ""
    wanted = desired_average - current_size
    delta = round(wanted * 0.2)
    return next_exact_string(rng, wanted - delta + (rng.randrange(2 * delta) if delta else 0))


def base_url(rng: random.Random) -> str:
    """An item URL of the reference's shape (``getBaseUrl``)."""
    parts = "/".join(next_string(rng, 5, "_") for _ in range(3))
    return f"https://www.nexmark.com/{parts}/item.htm?query=1"


@dataclass(frozen=True)
class NexmarkConfig:
    """What a generated stream is: its seed, size, first event time and rate."""

    seed: int = 0
    events: int = 100_000
    start: datetime = datetime(2026, 12, 1, tzinfo=UTC)  # fixed date: a reproducible stream
    events_per_second: int = 10_000  # the reference's firstEventRate

    def event_time(self, number: int) -> datetime:
        """Event ``number``'s time: the inter-event delay of the rate, in milliseconds."""
        return self.start + timedelta(milliseconds=number * 1000 // self.events_per_second)


class NexmarkGenerator:
    """The events of one ``NexmarkConfig``, the same ones in the same order every time."""

    def __init__(self, config: NexmarkConfig) -> None:
        self.config = config
        self._rng = random.Random(config.seed)
        self.hot_urls = tuple(base_url(self._rng) for _ in HOT_CHANNELS)

    def events(self) -> Iterator[dict[str, Any]]:
        """Every event of the stream, as its contract (``bench/nexmark/events``) has it."""
        for number in range(self.config.events):
            kind = event_kind(number)
            at = self.config.event_time(number)
            envelope = {"event_id": f"nexmark-{self.config.seed}-{number}", "event_type": kind,
                        "occurred_at": _instant(at), "schema_version": SCHEMA_VERSION}
            body = {"person": self._person, "auction": self._auction, "bid": self._bid}[kind](
                number, at)
            body["extra"] = next_extra(self._rng, _size(body), AVERAGE_SIZE[kind])
            yield {**envelope, **body}

    def _next_base0_person_id(self, number: int) -> int:
        """One of the active persons, or one up to ``PERSON_ID_LEAD`` ahead
        (``nextBase0PersonId``)."""
        people = last_base0_person_id(number) + 1
        active = min(people, NUM_ACTIVE_PEOPLE)
        return people - active + self._rng.randrange(active + PERSON_ID_LEAD)

    def _next_base0_auction_id(self, number: int) -> int:
        """An auction in flight, or one up to ``AUCTION_ID_LEAD`` ahead (``nextBase0AuctionId``)."""
        newest = last_base0_auction_id(number)
        oldest = max(newest - NUM_IN_FLIGHT_AUCTIONS, 0)
        return oldest + self._rng.randrange(newest - oldest + 1 + AUCTION_ID_LEAD)

    def _person(self, number: int, _at: datetime) -> dict[str, Any]:
        rng = self._rng
        return {
            "id": last_base0_person_id(number) + FIRST_PERSON_ID,
            "name": f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}",
            "email_address": f"{next_string(rng, 7)}@{next_string(rng, 5)}.com",
            "credit_card": " ".join(f"{rng.randrange(10_000):04d}" for _ in range(4)),
            "city": rng.choice(US_CITIES), "state": rng.choice(US_STATES)}

    def _auction(self, number: int, at: datetime) -> dict[str, Any]:
        rng = self._rng
        if rng.randrange(HOT_SELLERS) > 0:
            seller = last_base0_person_id(number) // HOT_SELLER_RATIO * HOT_SELLER_RATIO
        else:
            seller = self._next_base0_person_id(number)
        initial_bid = next_price(rng)
        # the reference's nextAuctionLengthMs: within twice the time until the auction
        # NUM_IN_FLIGHT_AUCTIONS later is created
        ahead = NUM_IN_FLIGHT_AUCTIONS * TOTAL_PROPORTION // PROPORTIONS["auction"]
        horizon_ms = (self.config.event_time(number + ahead) - at) // timedelta(milliseconds=1)
        expires = at + timedelta(milliseconds=1 + rng.randrange(max(horizon_ms * 2, 1)))
        return {
            "id": last_base0_auction_id(number) + FIRST_AUCTION_ID,
            "item_name": next_string(rng, 20), "description": next_string(rng, 100),
            "initial_bid": initial_bid, "reserve": initial_bid + next_price(rng),
            "expires": _instant(expires), "seller": seller + FIRST_PERSON_ID,
            "category": FIRST_CATEGORY_ID + rng.randrange(NUM_CATEGORIES)}

    def _bid(self, number: int, _at: datetime) -> dict[str, Any]:
        rng = self._rng
        if rng.randrange(HOT_AUCTIONS) > 0:
            auction = last_base0_auction_id(number) // HOT_AUCTION_RATIO * HOT_AUCTION_RATIO
        else:
            auction = self._next_base0_auction_id(number)
        if rng.randrange(HOT_BIDDERS) > 0:
            bidder = last_base0_person_id(number) // HOT_BIDDER_RATIO * HOT_BIDDER_RATIO + 1
        else:
            bidder = self._next_base0_person_id(number)
        price = next_price(rng)
        if rng.randrange(HOT_CHANNELS_RATIO) > 0:
            hot = rng.randrange(len(HOT_CHANNELS))
            channel, url = HOT_CHANNELS[hot], self.hot_urls[hot]
        else:
            n = rng.randrange(CHANNELS_NUMBER)
            channel, url = f"channel-{n}", f"{base_url(rng)}&channel_id={str(n)[::-1]}"
        return {"auction": auction + FIRST_AUCTION_ID, "bidder": bidder + FIRST_PERSON_ID,
                "price": price, "channel": channel, "url": url}


def _instant(moment: datetime) -> str:
    """UTC with milliseconds, as the contracts' ``date-time`` pattern has it."""
    utc = moment.astimezone(UTC)
    return f"{utc:%Y-%m-%dT%H:%M:%S}.{utc.microsecond // 1000:03d}Z"


def _size(body: dict[str, Any]) -> int:
    """The bytes of an event's fields, as the reference sizes it (strings' lengths, 8 per
    number)."""
    return sum(len(v) if isinstance(v, str) else 8 for v in body.values())
