"""Event contracts: one JSON Schema file per event type and version, the single source of truth.

From the files in ``schemas/events/`` this module derives everything else that knows an
event's shape: producer-side validation (``ContractRegistry.validate``), the Spark type
each field is read as and the Spark-side validation rules (``lambdalake.ingest.validation``
reads ``FieldRule``s from here), and the documentation (``contracts_markdown``). A file
named ``<event_type>.v<N>.json`` holds version N; event files may reference shared files
(``common.v1.json``) with ``allOf``/``$ref``.

Evolution is checked, not hoped for: a new version may add optional fields only; removing
or retyping a field, or adding a required one, is reported by ``evolution_problems``.
Readers validate an event of a newer version than they know against the newest version
they know (forward compatibility), so a compatible change flows through without a restart.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from functools import cached_property
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker
from referencing import Registry, Resource

from lambdalake.settings import PROJECT_ROOT

EVENTS_DIR = PROJECT_ROOT / "schemas" / "events"
_FILE_NAME = re.compile(r"^(?P<event_type>[a-z][a-z0-9_]*)\.v(?P<version>\d+)\.json$")
_SHARED = {"common"}
CONSTRAINT_KEYWORDS = ("const", "enum", "minimum", "maximum", "minLength", "maxLength",
                       "pattern", "multipleOf")


FORMATS = FormatChecker(formats=())


@FORMATS.checks("date-time", raises=ValueError)  # type: ignore[untyped-decorator]
def _is_event_time(value: object) -> bool:
    """UTC with milliseconds, and a real calendar time (no month 13), as Spark parses it."""
    if isinstance(value, str):
        datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ")
    return True


class ContractError(ValueError):
    """A contract file is invalid, or an event does not satisfy its contract."""


@dataclass(frozen=True)
class FieldRule:
    """One field of one event contract: its JSON type, Spark type and constraints."""

    name: str
    json_type: str
    spark_type: str
    required: bool
    constraints: Mapping[str, Any]
    description: str = ""


@dataclass(frozen=True)
class EventContract:
    """One version of one event type, with its references resolved into flat fields."""

    event_type: str
    version: int
    path: Path
    document: Mapping[str, Any]
    fields: Mapping[str, FieldRule] = field(repr=False)

    @property
    def required(self) -> tuple[str, ...]:
        return tuple(name for name, rule in self.fields.items() if rule.required)


def spark_type(schema: Mapping[str, Any]) -> str:
    """The Spark SQL type a JSON Schema property is parsed into (DDL)."""
    json_type = schema.get("type")
    if json_type == "string":
        return "STRING"  # date-time strings are checked by pattern, then converted
    if json_type == "integer":
        return "BIGINT"
    if json_type == "number":
        step = schema.get("multipleOf")
        if step is not None and float(step) in (0.01, 0.1, 1.0):
            scale = {0.01: 2, 0.1: 1, 1.0: 0}[float(step)]
            return f"DECIMAL(18,{scale})"  # money is exact, so sums agree across layers
        return "DOUBLE"
    if json_type == "boolean":
        return "BOOLEAN"
    raise ContractError(f"unsupported JSON type {json_type!r} in {schema}")


class ContractRegistry:
    """All event contracts found in a directory."""

    def __init__(self, directory: Path = EVENTS_DIR) -> None:
        self.directory = directory
        documents = {  # decimals stay exact, so multipleOf 0.01 holds for 19.99
            p.name: json.loads(p.read_text(), parse_float=Decimal)
            for p in sorted(directory.glob("*.json"))
        }
        self._registry: Registry = Registry().with_resources(
            (name, Resource.from_contents(doc)) for name, doc in documents.items()
        )
        self.contracts: dict[tuple[str, int], EventContract] = {}
        for name, document in documents.items():
            match = _FILE_NAME.match(name)
            if not match:
                raise ContractError(f"{directory / name}: name it <event_type>.v<N>.json")
            if match["event_type"] in _SHARED:
                continue
            contract = self._flatten(match["event_type"], int(match["version"]),
                                     directory / name, document, documents)
            self.contracts[(contract.event_type, contract.version)] = contract
        if not self.contracts:
            raise ContractError(f"no event contracts in {directory}")

    def _flatten(
        self, event_type: str, version: int, path: Path, document: Mapping[str, Any],
        documents: Mapping[str, Mapping[str, Any]],
    ) -> EventContract:
        properties: dict[str, dict[str, Any]] = {}
        required: set[str] = set()
        for part in [*(documents[ref["$ref"]] for ref in document.get("allOf", [])), document]:
            for name, schema in part.get("properties", {}).items():
                properties[name] = {**properties.get(name, {}), **schema}
            required |= set(part.get("required", []))
        for schema in properties.values():
            if "type" not in schema and "const" in schema:
                schema["type"] = {str: "string", int: "integer", float: "number"}[
                    type(schema["const"])
                ]
        if properties.get("event_type", {}).get("const") != event_type:
            raise ContractError(f"{path}: event_type must be const {event_type!r}")
        fields = {
            name: FieldRule(
                name=name,
                json_type=schema["type"],
                spark_type=spark_type(schema),
                required=name in required,
                constraints={k: schema[k] for k in CONSTRAINT_KEYWORDS if k in schema},
                description=schema.get("description", ""),
            )
            for name, schema in properties.items()
        }
        return EventContract(event_type, version, path, document, fields)

    @property
    def event_types(self) -> list[str]:
        return sorted({event_type for event_type, _ in self.contracts})

    def latest(self, event_type: str) -> EventContract:
        versions = [v for t, v in self.contracts if t == event_type]
        if not versions:
            raise ContractError(f"unknown event type {event_type!r}")
        return self.contracts[(event_type, max(versions))]

    def contract_for(self, event_type: str, version: int) -> EventContract:
        """The contract an event is read with: its own version, or the newest one known."""
        return self.contracts.get((event_type, version)) or self.latest(event_type)

    @cached_property
    def _validators(self) -> dict[tuple[str, int], Draft202012Validator]:
        return {
            key: Draft202012Validator(contract.document, registry=self._registry,
                                      format_checker=FORMATS)
            for key, contract in self.contracts.items()
        }

    def errors(self, event: Mapping[str, Any]) -> list[str]:
        """Why ``event`` breaks its contract (empty if it does not).

        The event is checked as it travels: encoded to JSON and decoded with exact decimals.
        """
        event = json.loads(encode_event(event), parse_float=Decimal)
        event_type, version = event.get("event_type"), event.get("schema_version")
        if not isinstance(event_type, str) or event_type not in self.event_types:
            return [f"unknown event type {event_type!r}"]
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            return [f"schema_version must be a positive integer, not {version!r}"]
        contract = self.contract_for(event_type, version)
        document = contract.document
        if version > contract.version:  # forward compatible: read as the newest we know
            document = {**document, "properties": {**document["properties"],
                                                   "schema_version": {"const": version}}}
            validator = Draft202012Validator(document, registry=self._registry,
                                             format_checker=FORMATS)
        else:
            validator = self._validators[(contract.event_type, contract.version)]
        return [
            f"{'.'.join(map(str, e.absolute_path)) or '(event)'}: {e.message}"
            for e in sorted(validator.iter_errors(event), key=str)
        ]

    def validate(self, event: Mapping[str, Any]) -> None:
        problems = self.errors(event)
        if problems:
            raise ContractError("; ".join(problems))

    def all_fields(self) -> dict[str, FieldRule]:
        """Every field of every contract (the newest definition wins), in a stable order."""
        merged: dict[str, FieldRule] = {}
        for key in sorted(self.contracts):
            for name, rule in self.contracts[key].fields.items():
                merged[name] = rule
        return merged


def encode_event(event: Mapping[str, Any]) -> bytes:
    """The wire form of an event: compact UTF-8 JSON; decimals as JSON numbers."""
    return json.dumps(event, separators=(",", ":"), default=_decimal_as_number).encode()


def _decimal_as_number(value: object) -> float:
    if isinstance(value, Decimal):
        return float(value)
    raise TypeError(f"cannot encode {type(value).__name__} in an event")


def evolution_problems(registry: ContractRegistry) -> list[str]:
    """Incompatible changes between consecutive versions of each event type."""
    problems = []
    for event_type in registry.event_types:
        versions = sorted(v for t, v in registry.contracts if t == event_type)
        for old_version, new_version in zip(versions, versions[1:], strict=False):
            old = registry.contracts[(event_type, old_version)]
            new = registry.contracts[(event_type, new_version)]
            where = f"{event_type} v{old_version} -> v{new_version}"
            for name, rule in old.fields.items():
                if name not in new.fields:
                    problems.append(f"{where}: field {name!r} was removed")
                elif new.fields[name].spark_type != rule.spark_type:
                    problems.append(
                        f"{where}: field {name!r} changed type "
                        f"{rule.spark_type} -> {new.fields[name].spark_type}"
                    )
            for name, rule in new.fields.items():
                if rule.required and not (name in old.fields and old.fields[name].required):
                    problems.append(f"{where}: new required field {name!r} (add it as optional)")
    return problems


def contracts_markdown(registry: ContractRegistry) -> str:
    """Documentation of every contract, generated from the schema files."""
    lines = ["# Event contracts", "",
             "Generated from `schemas/events/` by `lambdalake contracts docs`.", ""]
    for (event_type, version), contract in sorted(registry.contracts.items()):
        lines += [f"## {event_type} v{version}", "", contract.document.get("description", ""), "",
                  "| field | type | required | constraints | meaning |",
                  "| --- | --- | --- | --- | --- |"]
        for name, rule in contract.fields.items():
            constraints = ", ".join(
                f"{k}={json.dumps(v, default=_decimal_as_number)}"
                for k, v in rule.constraints.items()
            )
            escaped = constraints.replace("|", r"\|")
            required = "yes" if rule.required else "no"
            lines.append(
                f"| `{name}` | {rule.json_type} ({rule.spark_type}) | {required} | {escaped} | "
                f"{rule.description} |"
            )
        lines.append("")
    return "\n".join(lines)
