"""A deterministic catalogue of reference data and its changes, for demos, tests and benchmarks.

Beside the clickstream, the generator keeps two entities on their compacted topics:
``product`` (the products events name) and ``user_profile`` (most users, not all: an
event of a user without a profile joins to the ``unknown`` member). ``Catalogue.initial``
is the catalogue valid from a day before the traffic's event-time base; ``Catalogue.change``
is one change valid from a given event time, so changes fall *inside* the hours that have
events and as-of semantics matter: price changes, re-categorisations, new products,
deletions (a tombstone: the key with a null value), segment changes, new profiles, and
now and then a malformed change for quarantine (``REFERENCE_MALFORMED_KINDS``).

A change's validity clock is its own ``updated_at``, carried in the value; a tombstone has
no value, so its time travels in a record header of the same name. The Kafka timestamp
stays the time of producing: the log cleaner's ``min.compaction.lag.ms`` counts from it, and
a business time days old there would let the cleaner drop a change before a reader that
keeps up has seen it.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from lambdalake.contracts.registry import DELETION_TIME_HEADER, encode_event

CATEGORIES = ("books", "electronics", "fashion", "garden", "grocery", "toys")
BRANDS = ("acme", "globex", "initech", "umbrella", "wonka")
SEGMENTS = ("new", "regular", "vip")
SIGNUP_COUNTRIES = ("DE", "FR", "GB", "US", "NL", "ES", "IT", "PL")
CHANGE_MIX = (
    ("price_change", 0.45), ("recategorisation", 0.15), ("new_product", 0.10),
    ("product_deletion", 0.05), ("segment_change", 0.15), ("new_profile", 0.10),
)
REFERENCE_MALFORMED_KINDS = (
    "invalid_json", "key_mismatch", "missing_required", "constraint_violation")
INITIAL_VALIDITY = timedelta(days=1)
"""How long before the traffic's event-time base the initial catalogue becomes valid."""


def event_time(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class Change:
    """One record of an entity's compacted topic, and what it is."""

    kind: str  # "initial", a CHANGE_MIX kind or a REFERENCE_MALFORMED_KINDS kind
    entity: str
    key: str
    value: dict[str, Any] | None  # None: the key is deleted (a tombstone)
    updated_at: datetime
    raw: bytes | None = field(default=None, repr=False)  # a malformed change's bytes

    @property
    def malformed(self) -> bool:
        return self.kind in REFERENCE_MALFORMED_KINDS

    def encoded(self) -> bytes | None:
        """The record's value as it travels: JSON, nothing for a tombstone."""
        if self.malformed:
            return self.raw
        return None if self.value is None else encode_event(self.value)

    def headers(self) -> dict[str, bytes]:
        """A deletion's time, which its (absent) value cannot carry."""
        if self.value is None and not self.malformed:
            return {DELETION_TIME_HEADER: event_time(self.updated_at).encode()}
        return {}

    def as_manifest(self) -> dict[str, Any]:
        value = None if self.value is None else {
            k: str(v) if isinstance(v, Decimal) else v for k, v in self.value.items()}
        return {"kind": self.kind, "entity": self.entity, "key": self.key, "value": value,
                "updated_at": event_time(self.updated_at)}


class Catalogue:
    """The reference data of one generator run: same seed, same changes."""

    def __init__(self, products: int, users: int, seed: int, start: datetime,
                 profile_share: float = 0.9, malformed_share: float = 0.03) -> None:
        self.rng = random.Random(seed * 7919 + 1)  # the events' own random stream stays as is
        self.start = start
        self.users = users
        self.profile_share = profile_share
        self.malformed_share = malformed_share
        self.products: dict[str, dict[str, Any]] = {}
        self.profiles: dict[str, dict[str, Any]] = {}
        self.next_product = products
        self.initial_products = products

    def initial(self) -> Iterator[Change]:
        """Every product the events name, and a profile for most users."""
        valid_from = self.start - INITIAL_VALIDITY
        for number in range(self.initial_products):
            yield self._put_product(f"product-{number:04d}", valid_from, "initial")
        for number in range(self.users):
            if self.rng.random() < self.profile_share:
                yield self._put_profile(f"user-{number:06d}", valid_from, "initial")

    def change(self, at: datetime) -> Change:
        """One change valid from ``at``: usually well-formed, sometimes not."""
        kind = self.rng.choices([k for k, _ in CHANGE_MIX], weights=[w for _, w in CHANGE_MIX])[0]
        if self.rng.random() < self.malformed_share:
            return self._malformed(self.rng.choice(REFERENCE_MALFORMED_KINDS), at)
        if not self.products and kind in ("price_change", "recategorisation", "product_deletion"):
            kind = "new_product"
        if kind == "new_product":
            key = f"product-{self.next_product:04d}"
            self.next_product += 1
            return self._put_product(key, at, "new_product")
        if kind == "product_deletion":
            key = self.rng.choice(sorted(self.products))
            del self.products[key]
            return Change(kind, "product", key, None, at)
        if kind in ("price_change", "recategorisation"):
            key = self.rng.choice(sorted(self.products))
            return self._put_product(key, at, kind)
        if kind == "new_profile" or not self.profiles:
            missing = [f"user-{n:06d}" for n in range(self.users)
                       if f"user-{n:06d}" not in self.profiles]
            if missing:
                return self._put_profile(self.rng.choice(missing), at, "new_profile")
        return self._put_profile(self.rng.choice(sorted(self.profiles)), at, "segment_change")

    def _put_product(self, key: str, at: datetime, kind: str) -> Change:
        old = self.products.get(key)
        value = {
            "entity": "product", "schema_version": 1, "product_id": key,
            "name": old["name"] if old else f"Product {key.split('-')[1]}",
            "category": (self.rng.choice(CATEGORIES) if old is None or kind == "recategorisation"
                         else old["category"]),
            "brand": old["brand"] if old else self.rng.choice(BRANDS),
            "list_price": (Decimal(self.rng.randint(100, 50_000)) / 100
                           if old is None or kind == "price_change" else old["list_price"]),
            "updated_at": event_time(at),
        }
        self.products[key] = value
        return Change(kind, "product", key, value, at)

    def _put_profile(self, key: str, at: datetime, kind: str) -> Change:
        old = self.profiles.get(key)
        value = {
            "entity": "user_profile", "schema_version": 1, "user_id": key,
            "segment": self.rng.choice([s for s in SEGMENTS if not old or s != old["segment"]]),
            "signup_country": old["signup_country"] if old else self.rng.choice(SIGNUP_COUNTRIES),
            "updated_at": event_time(at),
        }
        self.profiles[key] = value
        return Change(kind, "user_profile", key, value, at)

    def _malformed(self, kind: str, at: datetime) -> Change:
        """A change that breaks its contract; the catalogue itself does not change."""
        key = self.rng.choice(sorted(self.products)) if self.products else "product-0000"
        current = self.products.get(key) or {"name": "Broken", "category": "toys",
                                             "brand": "acme", "list_price": Decimal("1.00")}
        value = {**current, "entity": "product", "schema_version": 1, "product_id": key,
                 "updated_at": event_time(at)}
        raw = encode_event(value)
        if kind == "invalid_json":
            raw = raw[:-5] + b',"oops'
        elif kind == "key_mismatch":
            raw = encode_event({**value, "product_id": f"{key}-other"})
        elif kind == "missing_required":
            raw = encode_event({k: v for k, v in value.items() if k != "category"})
        elif kind == "constraint_violation":
            raw = encode_event({**value, "list_price": Decimal("-1.00")})
        return Change(kind, "product", key, value, at, raw=raw)
