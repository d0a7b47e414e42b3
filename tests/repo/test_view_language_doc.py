"""docs/reference/view-language.md is the view language as the code has it: its generated
lists are current, and every YAML view on it loads with the definition loader against the
contracts it names (``# checked against <dir>``), as do the per-key examples of its tables."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from docsgen.view_language import (
    BASE_VIEW,
    EXAMPLES,
    JOIN_EXAMPLE,
    KEY_EXAMPLES,
    KIND_EXAMPLES,
    MEASURE_KEY_EXAMPLES,
    PAGE,
    loader_error,
    view_language_markdown,
    with_change,
)
from lambdalake.contracts.registry import ContractRegistry, EntityRegistry
from lambdalake.views.definition import ViewDefinition, load_views
from tests.support.repo import REPO

TEXT = PAGE.read_text()
FENCES = re.findall(r"^```yaml([^\n]*)\n(.*?)^```", TEXT, re.DOTALL | re.MULTILINE)
EXAMPLE_BLOCKS = [body for _, body in FENCES]
RIDE_HAILING_QUESTIONS = {"average_fare", "card_revenue", "rides_by_fare_band",
                          "top_pickup_zones", "last_ride_per_driver", "rides_per_hour_hopping"}


def _marker(body: str, name: str) -> str | None:
    match = re.search(rf"^# {name}:? (\S+)", body, re.MULTILINE)
    return match[1] if match else None


def test_the_page_is_current_with_its_generator() -> None:
    assert TEXT == view_language_markdown(), (
        f"{PAGE.relative_to(REPO)} is stale: run `python -m docsgen.reference`")


def test_the_page_is_in_the_sites_reference_section() -> None:
    nav = yaml.safe_load((REPO / "mkdocs.yml").read_text())["nav"]
    reference = next(entry["Reference"] for entry in nav if "Reference" in entry)
    assert "reference/view-language.md" in [next(iter(e.values())) for e in reference]


def test_every_yaml_block_is_a_view_naming_its_contracts() -> None:
    assert FENCES and all(info == "" for info, _ in FENCES), (
        "a ```yaml fence takes no options (mkdocs' superfences would not see it as a fence)")
    for body in EXAMPLE_BLOCKS:
        assert _marker(body, "checked against"), body
    names = [yaml.safe_load(body)["name"] for body in EXAMPLE_BLOCKS]
    assert len(set(names)) == len(names)
    assert RIDE_HAILING_QUESTIONS <= set(names)


@pytest.mark.parametrize("body", EXAMPLE_BLOCKS,
                         ids=[yaml.safe_load(b)["name"] for b in EXAMPLE_BLOCKS])
def test_each_example_loads_against_the_contracts_it_names(body: str, tmp_path: Path) -> None:
    contracts = REPO / str(_marker(body, "checked against"))
    name = yaml.safe_load(body)["name"]
    (tmp_path / f"{name}.yaml").write_text(body)
    entities = EntityRegistry(contracts / "entities") if (contracts / "entities").is_dir() else None
    views = load_views(tmp_path, ContractRegistry(contracts / "events"), entities)
    assert list(views) == [name]


def test_every_worked_question_uses_what_it_is_about() -> None:
    views = {v["name"]: v for v in map(yaml.safe_load, EXAMPLE_BLOCKS)}
    assert "avg" in {m["kind"] for m in views["average_fare"]["measures"]}
    assert any("card" in m.get("filter", "") for m in views["card_revenue"]["measures"])
    assert "fare_band" in views["rides_by_fare_band"]["columns"]
    assert "fare_band" in views["rides_by_fare_band"]["dimensions"]
    assert "top_k" in {m["kind"] for m in views["top_pickup_zones"]["measures"]}
    assert views["last_ride_per_driver"]["dimensions"] == ["driver_id"]
    assert {"last", "last_k"} <= {m["kind"] for m in views["last_ride_per_driver"]["measures"]}
    hopping = views["rides_per_hour_hopping"]
    assert (hopping["grain"], hopping["slide"]) == ("1 hour", "15 minutes")


@pytest.mark.parametrize("key", sorted(KEY_EXAMPLES))
def test_each_keys_example_loads(key: str) -> None:
    assert key in ViewDefinition.model_fields, f"{key!r} is no key of the view definition"
    example = KEY_EXAMPLES[key][1]
    assert list(yaml.safe_load(example)) == [key]
    assert loader_error(with_change(example)) is None


def test_each_measure_and_join_example_loads() -> None:
    measures = [yaml.safe_load(e) for _, e in [*MEASURE_KEY_EXAMPLES.values(),
                                                *KIND_EXAMPLES.values()]]
    for key, (_, example) in MEASURE_KEY_EXAMPLES.items():
        assert key in yaml.safe_load(example), (key, example)
    for measure in measures:
        view = {**yaml.safe_load(BASE_VIEW), "measures": [measure]}
        assert loader_error(yaml.safe_dump(view, sort_keys=False)) is None, measure
    joined = with_change(f"joins: [{JOIN_EXAMPLE}]\ndimensions: [fleet, vehicle_class]")
    assert loader_error(joined) is None


def test_the_contracts_the_examples_name_are_the_ride_hailing_example() -> None:
    named = {_marker(body, "checked against") for body in EXAMPLE_BLOCKS}
    assert named == {EXAMPLES.relative_to(REPO).as_posix()}
