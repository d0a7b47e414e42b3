import json
import shutil
from decimal import Decimal
from pathlib import Path

import pytest

from lambdalake.contracts.registry import (
    ContractError,
    ContractRegistry,
    EntityRegistry,
    contracts_markdown,
    encode_event,
    events_dir,
    evolution_problems,
)
from tests.support.repo import REPO

PURCHASE = {
    "event_id": "e-1", "event_type": "purchase", "user_id": "u-1", "session_id": "s-1",
    "occurred_at": "2026-11-22T10:00:00.123Z", "schema_version": 1, "country": "DE",
    "device": "mobile", "product_id": "p-1", "quantity": 2, "amount": Decimal("19.99"),
    "currency": "EUR",
}


@pytest.fixture
def contracts_copy(tmp_path: Path) -> Path:
    target = tmp_path / "events"
    shutil.copytree(events_dir(), target)
    return target


def test_the_three_clickstream_contracts_exist() -> None:
    registry = ContractRegistry()
    assert registry.event_types == ["add_to_cart", "page_view", "purchase"]
    assert set(registry.latest("purchase").required) >= {"event_id", "amount", "currency"}


def test_a_valid_event_passes_and_money_is_exact() -> None:
    registry = ContractRegistry()
    assert registry.errors(PURCHASE) == []
    assert registry.errors({**PURCHASE, "amount": 19.99}) == []  # as a float on the wire too
    assert "multiple of 0.01" in registry.errors({**PURCHASE, "amount": Decimal("19.999")})[0]
    assert json.loads(encode_event(PURCHASE))["amount"] == 19.99


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"quantity": "2"}, "is not of type 'integer'"),
        ({"event_type": "refund"}, "unknown event type"),
        ({"device": "fridge"}, "is not one of"),
        ({"occurred_at": "2026-11-22 10:00:00"}, "does not match"),
        ({"occurred_at": "2026-13-01T00:00:00.000Z"}, "is not a 'date-time'"),
        ({"schema_version": 0}, "positive integer"),
    ],
)
def test_invalid_events_say_why(change: dict, message: str) -> None:
    problems = ContractRegistry().errors({**PURCHASE, **change})
    assert problems and message in problems[0]


def test_a_missing_required_field_is_named() -> None:
    event = {k: v for k, v in PURCHASE.items() if k != "currency"}
    with pytest.raises(ContractError, match="'currency' is a required property"):
        ContractRegistry().validate(event)


def test_spark_types_are_derived_from_the_contracts() -> None:
    types = {name: rule.spark_type for name, rule in ContractRegistry().all_fields().items()}
    assert types["amount"] == "DECIMAL(18,2)" and types["quantity"] == "BIGINT"
    assert types["occurred_at"] == "STRING"  # checked by pattern, then converted


def test_a_new_optional_field_is_compatible_and_flows_through(contracts_copy: Path) -> None:
    v2 = json.loads((contracts_copy / "page_view.v1.json").read_text())
    v2["$id"] = "page_view.v2.json"
    v2["properties"]["schema_version"] = {"const": 2}
    v2["properties"]["referrer"] = {"type": "string", "description": "Where the user came from."}
    (contracts_copy / "page_view.v2.json").write_text(json.dumps(v2))
    registry = ContractRegistry(contracts_copy)
    assert evolution_problems(registry) == []
    assert registry.all_fields()["referrer"].spark_type == "STRING"
    view = {**{k: v for k, v in PURCHASE.items() if k in registry.latest("page_view").fields},
            "event_type": "page_view", "page": "/home"}
    assert registry.errors({**view, "schema_version": 2, "referrer": "/ad"}) == []
    assert registry.errors(view) == []  # old producers keep working
    # a reader that only knows v1 reads v2 events too (forward compatibility)
    assert ContractRegistry().errors({**view, "schema_version": 2, "referrer": "/ad"}) == []


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (lambda s: s["properties"].pop("page") and s["required"].remove("page"),
         "field 'page' was removed"),
        (lambda s: s["properties"].update(page={"type": "integer"}),
         "field 'page' changed type STRING -> BIGINT"),
        (lambda s: (s["properties"].update(campaign={"type": "string"}),
                    s["required"].append("campaign")),
         "new required field 'campaign'"),
    ],
)
def test_incompatible_changes_are_rejected_with_a_clear_message(
    contracts_copy: Path, edit, problem: str
) -> None:
    v2 = json.loads((contracts_copy / "page_view.v1.json").read_text())
    v2["$id"] = "page_view.v2.json"
    v2["properties"]["schema_version"] = {"const": 2}
    edit(v2)
    (contracts_copy / "page_view.v2.json").write_text(json.dumps(v2))
    assert problem in " ".join(evolution_problems(ContractRegistry(contracts_copy)))


def test_the_shipped_contracts_evolve_compatibly() -> None:
    assert evolution_problems(ContractRegistry()) == []


def test_the_event_docs_are_generated_from_the_contracts() -> None:
    docs = (REPO / "docs" / "events.md").read_text()
    assert docs == contracts_markdown(ContractRegistry()) + "\n", (
        "docs/events.md is stale: run `lambdalake docs`"
    )
    entities = (REPO / "docs" / "entities.md").read_text()
    assert entities == contracts_markdown(EntityRegistry()) + "\n", (
        "docs/entities.md is stale: run `lambdalake docs`")


PRODUCT = {"entity": "product", "schema_version": 1, "product_id": "product-0001",
           "name": "Kettle", "category": "garden", "brand": "acme",
           "list_price": Decimal("19.99"), "updated_at": "2026-11-22T10:00:00.000Z"}


def test_entity_contracts_name_their_key_and_validity_time() -> None:
    entities = EntityRegistry()
    assert entities.entities == ["product", "user_profile"]
    assert entities.latest("product").key == "product_id"
    assert entities.latest("user_profile").key == "user_id"
    assert entities.latest("product").fields["list_price"].spark_type == "DECIMAL(18,2)"
    entities.validate("product", PRODUCT)
    assert evolution_problems(entities) == []


@pytest.mark.parametrize(("change", "problem"), [
    ({"list_price": Decimal("-1")}, "list_price"),
    ({"category": "weapons"}, "category"),
    ({"updated_at": "yesterday"}, "updated_at"),
    ({"entity": "user_profile"}, "entity"),
])
def test_an_entity_record_that_breaks_its_contract_says_which_field(change, problem) -> None:
    errors = EntityRegistry().errors("product", {**PRODUCT, **change})
    assert errors and problem in " ".join(errors)


def test_an_entity_contract_without_a_required_key_is_refused(tmp_path: Path) -> None:
    document = json.loads((REPO / "schemas" / "entities" / "product.v1.json").read_text())
    document["x-key"] = "brand_new"
    (tmp_path / "product.v1.json").write_text(json.dumps(document))
    with pytest.raises(ContractError, match="x-key"):
        EntityRegistry(tmp_path)
