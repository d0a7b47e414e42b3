"""docs/views.md shows what the platform does: its example is the shipped view, its worked
examples are valid views of their contract, every expression it names as refused is
refused, and every test file it names exists."""

from __future__ import annotations

import re

import pytest
import yaml

from lambdalake.contracts.registry import ContractRegistry
from lambdalake.views.definition import ViewDefinition, views_dir
from lambdalake.views.expressions import ExpressionError, SqlType, typed
from tests.support.repo import REPO

PAGE = (REPO / "docs" / "views.md").read_text()
COLUMNS = {"amount": SqlType.of("DECIMAL(18,2)"), "quantity": SqlType.of("BIGINT"),
           "currency": SqlType.of("STRING"), "paid": SqlType.of("BOOLEAN")}


def test_the_example_is_the_shipped_view() -> None:
    example = PAGE.split("```yaml\n", 1)[1].split("```", 1)[0]
    assert example.startswith("# schemas/views/order_value.yaml (shipped)")
    assert yaml.safe_load(example) == yaml.safe_load((views_dir() / "order_value.yaml").read_text())


WORKED = re.findall(r"```yaml\n(.*?)```", PAGE.split("\n## Worked examples", 1)[1]
                    .split("\n## ", 1)[0], re.DOTALL)


def test_each_worked_example_is_a_valid_view_of_the_ride_hailing_contract() -> None:
    contracts = ContractRegistry(REPO / "docs" / "examples" / "ride-hailing" / "events")
    assert len(WORKED) == 6
    kinds, slides = set(), set()
    for example in WORKED:
        view = ViewDefinition.model_validate(yaml.safe_load(example))
        view.check_against(contracts)  # raises ViewError naming what is wrong
        kinds |= {m.kind for m in view.measures}
        slides.add(view.windows_per_event)
    assert {"avg", "stddev", "sum", "last", "last_k", "top_k"} <= kinds
    assert slides == {1, 4}, "rides per hour every 15 minutes: hopping windows"


@pytest.mark.parametrize("text", ["currency + 1", "paid AND quantity", "SUM(amount)", "RAND()",
                                  "NOW()", "CURRENT_TIMESTAMP", "e.amount",
                                  "ROUND(amount / quantity, 2)"])
def test_what_the_page_says_is_refused_is_refused(text: str) -> None:
    assert text.split("(")[0] in PAGE
    with pytest.raises(ExpressionError):
        typed(text, COLUMNS)


def test_every_test_file_the_page_names_exists() -> None:
    named = set(re.findall(r"`(tests/[\w/]+\.py)`", PAGE))
    assert len(named) >= 6
    assert [path for path in sorted(named) if not (REPO / path).is_file()] == []
