"""The compiled record checks decide as the contract's JSON Schema validator does, on good
records and on every kind of bad one, for every entity contract."""

from __future__ import annotations

import json
import random
from decimal import Decimal
from typing import Any

import pytest

from lambdalake.contracts.record_checks import UnsupportedSchema, compile_record_check
from lambdalake.contracts.registry import FORMATS, EntityRegistry, encode_event
from lambdalake.generator.catalogue import Catalogue
from tests.unit.generator.test_traffic import START

ENTITIES = EntityRegistry()
ODD_VALUES = [None, True, False, 0, 1, -1, 2**40, Decimal("1.5"), Decimal("0.001"),
              Decimal("-0.01"), Decimal("1000000.01"), Decimal("1E+3"), "", "x", "vip",
              "books", "BOOKS", "DE", "de", "D", "2026-11-23T06:00:00.000Z",
              "2026-13-23T06:00:00.000Z", "2026-11-23T06:00:00Z", "2026-11-23 06:00:00.000",
              "a" * 65, "a" * 201, "product", "user_profile", [], {}, [1], {"a": 1}]


def travelled(record: Any) -> Any:
    """A record as a reader gets it: JSON, decimals exact."""
    return json.loads(json.dumps(record, default=str) if not isinstance(record, dict)
                      else encode_event(record), parse_float=Decimal)


def records() -> list[tuple[str, Any]]:
    """Good records of each entity, and each of their fields dropped or replaced by odd
    values, and records that are no objects at all."""
    catalogue = Catalogue(products=30, users=30, seed=5, start=START)
    good = [(c.entity, c.value) for c in catalogue.initial()]
    rng = random.Random(11)
    found = list(good)
    for entity, value in good[:10] + good[-10:]:
        assert value is not None
        for name in value:
            found.append((entity, {k: v for k, v in value.items() if k != name}))
            for odd in ODD_VALUES:
                found.append((entity, {**value, name: odd}))
        found.append((entity, {**value, "extra": rng.random()}))
    found += [(entity, odd) for entity in ENTITIES.entities for odd in ODD_VALUES]
    return found


@pytest.mark.parametrize("entity", ENTITIES.entities)
def test_every_entity_contract_compiles(entity: str) -> None:
    compile_record_check(ENTITIES.latest(entity).document, FORMATS)


def test_the_checks_and_the_validator_agree_on_good_and_bad_records() -> None:
    verdicts = {True: 0, False: 0}
    for entity, record in records():
        decoded = travelled(record)
        expected = not ENTITIES.errors(entity, decoded)
        assert ENTITIES.is_valid(entity, decoded) == expected, (entity, record)
        verdicts[expected] += 1
    assert verdicts[True] > 50 and verdicts[False] > 1000, verdicts


def test_what_the_checks_cannot_decide_exactly_is_refused() -> None:
    for document in [{"type": "object", "additionalProperties": False},
                     {"type": "array"},
                     {"type": "object", "properties": {"a": {"type": "object"}}},
                     {"type": "object", "properties": {"a": {"type": "string",
                                                             "format": "email"}}},
                     {"type": "object", "properties": {"a": {"type": "number",
                                                             "multipleOf": 0.01}}}]:
        with pytest.raises(UnsupportedSchema):
            compile_record_check(document, FORMATS)
