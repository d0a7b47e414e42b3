"""Contracts: one JSON Schema file per event type (or entity) and version, the single source
of truth.

From the files in ``schemas/events/`` this module derives everything else that knows an
event's shape: producer-side validation (``ContractRegistry.validate``), the Spark type
each field is read as and the Spark-side validation rules (``lambdalake.streaming.classification``
reads ``FieldRule``s from here), and the documentation (``contracts_markdown``). A file
named ``<event_type>.v<N>.json`` holds version N; event files may reference shared files
(``common.v1.json``) with ``allOf``/``$ref``.

Reference data has contracts of the same kind in ``schemas/entities/``
(``EntityRegistry``): one per entity (``product``, ``user_profile``), naming its key field
(``x-key``, also the Kafka key of its compacted topic) and ``updated_at``, the time from
which a version is valid.

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

from lambdalake.contracts.record_checks import RecordCheck, UnsupportedSchema, compile_record_check
from lambdalake.settings import get_settings


def events_dir() -> Path:
    """The project's event contracts, ``schemas/events`` (``LAMBDALAKE_PROJECT_DIR``)."""
    return get_settings().project_path("schemas", "events")


def entities_dir() -> Path:
    """The project's reference-entity contracts, ``schemas/entities``."""
    return get_settings().project_path("schemas", "entities")
_FILE_NAME = re.compile(r"^(?P<name>[a-z][a-z0-9_]*)\.v(?P<version>\d+)\.json$")
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


def _documents(directory: Path) -> dict[str, Mapping[str, Any]]:
    """The JSON documents of a contracts folder by file name (decimals stay exact, so
    multipleOf 0.01 holds for 19.99)."""
    return {p.name: json.loads(p.read_text(), parse_float=Decimal)
            for p in sorted(directory.glob("*.json"))}


def _references(documents: Mapping[str, Mapping[str, Any]]) -> Registry:
    return Registry().with_resources(
        (name, Resource.from_contents(doc)) for name, doc in documents.items())


def _named_versions(directory: Path, documents: Mapping[str, Mapping[str, Any]]
                    ) -> list[tuple[str, int, Path, Mapping[str, Any]]]:
    """(name, version, path, document) of each contract file; shared files are skipped."""
    found = []
    for file_name, document in documents.items():
        match = _FILE_NAME.match(file_name)
        if not match:
            raise ContractError(f"{directory / file_name}: name it <name>.v<N>.json")
        if match["name"] not in _SHARED:
            found.append((match["name"], int(match["version"]), directory / file_name, document))
    return found


def _flat_fields(document: Mapping[str, Any], documents: Mapping[str, Mapping[str, Any]]
                 ) -> dict[str, FieldRule]:
    """A contract's fields, with the shared files it references (``allOf``) merged in."""
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
    return {
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


def _const_of(fields: Mapping[str, FieldRule], name: str) -> Any:
    """The ``const`` a contract gives field ``name`` (None: no such field, or no const)."""
    rule = fields.get(name)
    return rule.constraints.get("const") if rule else None


def _error_messages(validator: Draft202012Validator, document: Mapping[str, Any]) -> list[str]:
    return [f"{'.'.join(map(str, e.absolute_path)) or '(record)'}: {e.message}"
            for e in sorted(validator.iter_errors(document), key=str)]


class ContractRegistry:
    """All event contracts found in a directory."""

    def __init__(self, directory: Path | None = None) -> None:
        directory = directory or events_dir()
        self.directory = directory
        documents = _documents(directory)
        self._registry = _references(documents)
        self.contracts: dict[tuple[str, int], EventContract] = {}
        for event_type, version, path, document in _named_versions(directory, documents):
            fields = _flat_fields(document, documents)
            if _const_of(fields, "event_type") != event_type:
                raise ContractError(f"{path}: event_type must be const {event_type!r}")
            self.contracts[(event_type, version)] = EventContract(
                event_type, version, path, document, fields)
        if not self.contracts:
            raise ContractError(f"no event contracts in {directory}")

    @property
    def event_types(self) -> list[str]:
        return sorted({event_type for event_type, _ in self.contracts})

    def latest(self, event_type: str) -> EventContract:
        """The newest version of ``event_type``'s contract; ContractError if none."""
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
        return _error_messages(validator, event)

    def validate(self, event: Mapping[str, Any]) -> None:
        """Raise ContractError naming every problem of ``event`` (``errors``), if any."""
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


@dataclass(frozen=True)
class EntityContract:
    """One version of one reference entity: its key field and flat fields."""

    entity: str
    version: int
    key: str
    path: Path
    document: Mapping[str, Any]
    fields: Mapping[str, FieldRule] = field(repr=False)


ENTITY_TIME_FIELD = "updated_at"
"""The field every entity carries: when the version it describes became valid."""
DELETION_TIME_HEADER = "updated_at"
"""The record header with a deletion's time (a tombstone has no value to carry it); a
deletion without it is dated by its Kafka timestamp."""


class EntityRegistry:
    """All reference-entity contracts found in a directory."""

    def __init__(self, directory: Path | None = None) -> None:
        directory = directory or entities_dir()
        self.directory = directory
        documents = _documents(directory)
        self._registry = _references(documents)
        self.contracts: dict[tuple[str, int], EntityContract] = {}
        for entity, version, path, document in _named_versions(directory, documents):
            fields = _flat_fields(document, documents)
            key = document.get("x-key")
            if _const_of(fields, "entity") != entity:
                raise ContractError(f"{path}: entity must be const {entity!r}")
            if not isinstance(key, str) or key not in fields or not fields[key].required:
                raise ContractError(f"{path}: x-key must name a required field")
            if ENTITY_TIME_FIELD not in fields or not fields[ENTITY_TIME_FIELD].required:
                raise ContractError(f"{path}: {ENTITY_TIME_FIELD} must be a required field")
            self.contracts[(entity, version)] = EntityContract(
                entity, version, key, path, document, fields)

    @property
    def entities(self) -> list[str]:
        return sorted({entity for entity, _ in self.contracts})

    def latest(self, entity: str) -> EntityContract:
        """The newest version of ``entity``'s contract; ContractError if none."""
        versions = [v for e, v in self.contracts if e == entity]
        if not versions:
            raise ContractError(f"unknown entity {entity!r}")
        return self.contracts[(entity, max(versions))]

    @cached_property
    def _validators(self) -> dict[str, Draft202012Validator]:
        return {entity: Draft202012Validator(self.latest(entity).document,
                                             registry=self._registry, format_checker=FORMATS)
                for entity in self.entities}

    @cached_property
    def _checks(self) -> dict[str, RecordCheck]:
        checks: dict[str, RecordCheck] = {}
        for entity in self.entities:
            try:
                checks[entity] = compile_record_check(self.latest(entity).document, FORMATS)
            except UnsupportedSchema:
                checks[entity] = self._validators[entity].is_valid
        return checks

    def is_valid(self, entity: str, record: Any) -> bool:
        """Whether ``record``, decoded as it travels (JSON, exact decimals), satisfies
        ``entity``'s newest contract: ``not errors(...)`` without the messages and the
        re-encoding, compiled to plain checks where the contract allows
        (``lambdalake.contracts.record_checks``): what the speed layer asks of every record."""
        if entity not in self._checks:
            raise ContractError(f"unknown entity {entity!r}")
        return self._checks[entity](record)

    def errors(self, entity: str, record: Mapping[str, Any]) -> list[str]:
        """Why ``record`` (the value of a change of ``entity``) breaks its newest contract."""
        if entity not in self._validators:
            raise ContractError(f"unknown entity {entity!r}")
        record = json.loads(encode_event(record), parse_float=Decimal)
        return _error_messages(self._validators[entity], record)

    def validate(self, entity: str, record: Mapping[str, Any]) -> None:
        """Raise ContractError naming every problem of ``entity``'s ``record``, if any."""
        problems = self.errors(entity, record)
        if problems:
            raise ContractError(f"{entity}: " + "; ".join(problems))


def encode_event(event: Mapping[str, Any]) -> bytes:
    """The wire form of an event: compact UTF-8 JSON; decimals as JSON numbers."""
    return json.dumps(event, separators=(",", ":"), default=_decimal_as_number).encode()


def _decimal_as_number(value: object) -> float:
    if isinstance(value, Decimal):
        return float(value)
    raise TypeError(f"cannot encode {type(value).__name__} in an event")


def evolution_problems(registry: ContractRegistry | EntityRegistry) -> list[str]:
    """Incompatible changes between consecutive versions of each event type (or entity)."""
    problems = []
    for name in sorted({name for name, _ in registry.contracts}):
        versions = sorted(v for n, v in registry.contracts if n == name)
        for old_version, new_version in zip(versions, versions[1:], strict=False):
            old = registry.contracts[(name, old_version)]
            new = registry.contracts[(name, new_version)]
            where = f"{name} v{old_version} -> v{new_version}"
            for field_name, rule in old.fields.items():
                if field_name not in new.fields:
                    problems.append(f"{where}: field {field_name!r} was removed")
                elif new.fields[field_name].spark_type != rule.spark_type:
                    problems.append(
                        f"{where}: field {field_name!r} changed type "
                        f"{rule.spark_type} -> {new.fields[field_name].spark_type}"
                    )
            for field_name, rule in new.fields.items():
                if rule.required and not (field_name in old.fields
                                          and old.fields[field_name].required):
                    problems.append(
                        f"{where}: new required field {field_name!r} (add it as optional)")
    return problems


def contracts_markdown(registry: ContractRegistry | EntityRegistry) -> str:
    """Documentation of every contract, generated from the schema files."""
    entities = isinstance(registry, EntityRegistry)
    folder = "schemas/entities/" if entities else "schemas/events/"
    lines = ["# Reference entity contracts" if entities else "# Event contracts", "",
             f"Generated from `{folder}` by `lambdalake docs`.", ""]
    contracts: dict[tuple[str, int], EventContract | EntityContract] = {**registry.contracts}
    for (name, version), contract in sorted(contracts.items()):
        key = [f"Key: `{contract.key}`.", ""] if isinstance(contract, EntityContract) else []
        lines += [f"## {name} v{version}", "", contract.document.get("description", ""), "",
                  *key,
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
