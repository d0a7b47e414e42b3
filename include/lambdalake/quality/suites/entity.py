"""``entity_suite`` (one entity's rows of ``reference_history``, whole): the key, the
    validity interval and the contract's fields exist; the key, ``valid_from``, the version
    and every field the contract requires are not null; (key, version) is unique; no
    version is empty or overlaps the key's next (``_validity``); at most one version per
    key is open (``_open_versions``), so ``reference_current`` has one row per live key;
    enums and numbers hold the contract's values and bounds. Every rule is critical: the
    enriched views join this table.
"""

from __future__ import annotations

import great_expectations as gx  # the package's __init__ silenced GX analytics first
from great_expectations.expectations.expectation import Expectation

from lambdalake.contracts.registry import EntityRegistry
from lambdalake.quality.suites.common import (
    CRITICAL,
    enum_values_of,
    expect_on,
    loosest_bounds_of,
    new_suite,
)
from lambdalake.quality.suites.view import unique_check


def entity_suite_name(entity: str) -> str:
    return f"reference_history_{entity}"


def overlapping_versions() -> str:
    """SQL: '<key> v<version>: …' for a version whose interval is empty or overlaps the key's
    next version, else null (SCD2: a key's versions follow each other without overlap)."""
    following = ("lead(valid_from) OVER (PARTITION BY entity_key "
                 "ORDER BY valid_from, version)")
    named = "concat(entity_key, ' v', cast(version AS STRING), "
    return ("CASE WHEN valid_to IS NOT NULL AND valid_to <= valid_from "
            f"THEN {named}': an empty interval') "
            f"WHEN {following} < coalesce(valid_to, TIMESTAMP '9999-12-31 00:00:00') "
            f"THEN {named}': overlaps the next version') END")


def open_versions() -> str:
    """SQL: the key if more than one of its versions is open (``valid_to`` null), else null:
    ``reference_current`` is the open versions, one row per live key."""
    return ("CASE WHEN sum(CASE WHEN valid_to IS NULL THEN 1 ELSE 0 END) "
            "OVER (PARTITION BY entity_key) > 1 THEN entity_key END")


def entity_suite(entity: str, entities: EntityRegistry | None = None) -> gx.ExpectationSuite:
    """The suite of one entity's rows of ``reference_history`` (see the module docstring)."""
    entities = entities or EntityRegistry()
    contract = entities.latest(entity)
    fields = contract.fields
    expectations: list[Expectation] = [
        expect_on(gx.expectations.ExpectTableColumnsToMatchSet, "columns",
                "the history has the key, the validity interval, the version and the "
                "contract's fields", CRITICAL,
                column_set=["entity_key", "valid_from", "valid_to", "version", *fields],
                exact_match=False),
        *(expect_on(gx.expectations.ExpectColumnValuesToNotBeNull, f"not_null:{column}",
                  "every version has its key, its start and its number", CRITICAL,
                  column=column) for column in ("entity_key", "valid_from", "version")),
        *(expect_on(gx.expectations.ExpectColumnValuesToNotBeNull, f"not_null:{name}",
                  f"the {entity} contract requires {name}", CRITICAL, column=name)
          for name, rule in fields.items() if rule.required),
        unique_check(["entity_key", "version"], "one row per key and version"),
        expect_on(gx.expectations.ExpectColumnValuesToBeNull, "validity",
                "a key's versions follow each other: none is empty or overlaps the next "
                "(_validity shows each)", CRITICAL, about="valid_from,valid_to",
                column="_validity"),
        expect_on(gx.expectations.ExpectColumnValuesToBeNull, "one_current_row_per_key",
                "at most one open version per key, so the current state has one row per "
                "live key (_open_versions shows each key with more)", CRITICAL,
                about="valid_to", column="_open_versions"),
    ]
    for name, rule in fields.items():
        allowed = enum_values_of([rule])
        if allowed is not None:
            expectations.append(expect_on(
                gx.expectations.ExpectColumnValuesToBeInSet, f"in_set:{name}",
                f"{name} is one of the {entity} contract's values", CRITICAL,
                column=name, value_set=allowed))
        lower, upper = loosest_bounds_of([rule])
        if lower is not None or upper is not None:
            expectations.append(expect_on(
                gx.expectations.ExpectColumnValuesToBeBetween, f"range:{name}",
                f"{name} is within the {entity} contract's bounds", CRITICAL,
                column=name, min_value=lower, max_value=upper))
    return new_suite(entity_suite_name(entity), expectations,
                  {"_validity": overlapping_versions(), "_open_versions": open_versions()})
