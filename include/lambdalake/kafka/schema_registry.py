"""The event contracts in a schema registry, and Avro in the Confluent wire format.

The JSON Schema files stay the source of truth; each contract version is translated into
an Avro record schema (same field names and order, the same types the Spark side reads:
strings, longs, doubles, exact decimals) and registered in any Confluent-compatible
registry. Several event types share the events topic, so each has its own subject under
the topic (the ``TopicRecordNameStrategy``): ``<topic>-lambdalake.events.<event_type>``,
whose versions are the contract's versions in order, under the compatibility level set on
the subject. A contract change the registry refuses is reported with the registry's reason.

A record on the wire is the magic byte 0, the writer schema's id (4 bytes, big-endian) and
the Avro body. A reader resolves the writer schema by that id and reads it as the newest
contract it knows, so a producer of a newer compatible version and an older reader work
together without a restart.
"""

from __future__ import annotations

import io
import json
import logging
import re
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from functools import cache
from typing import Any

import fastavro
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

try:  # the HTTP client confluent-kafka's registry client uses: httpx2 where installed
    import httpx2 as _http
except ImportError:  # pragma: no cover - depends on the installed extras
    import httpx as _http  # type: ignore[no-redef]

from lambdalake.contracts.registry import (
    ContractError,
    ContractRegistry,
    EventContract,
    FieldRule,
    encode_event,
)
from lambdalake.settings import RegistrySettings, Settings

NAMESPACE = "lambdalake.events"
MAGIC_BYTE = 0
_HEADER = struct.Struct(">bI")
_DECIMAL = re.compile(r"^DECIMAL\((?P<precision>\d+),(?P<scale>\d+)\)$")
_AVRO_TYPES = {"STRING": "string", "BIGINT": "long", "DOUBLE": "double", "BOOLEAN": "boolean"}
log = logging.getLogger(__name__)
UNREACHABLE = _http.TransportError
"""What the registry client raises when nothing answers at the registry's URL (one that
answers with an error raises ``SchemaRegistryError``)."""
SUBJECT_NOT_FOUND = 40401
SCHEMA_NOT_FOUND = 40403


def avro_type(rule: FieldRule) -> str | dict[str, Any]:
    """The Avro type of a contract field: the Spark type it is read as, in Avro's terms."""
    decimal = _DECIMAL.match(rule.spark_type)
    if decimal:
        return {"type": "bytes", "logicalType": "decimal",
                "precision": int(decimal["precision"]), "scale": int(decimal["scale"])}
    return _AVRO_TYPES[rule.spark_type]


def avro_schema(contract: EventContract) -> dict[str, Any]:
    """The Avro record schema of one contract version; optional fields default to null."""
    fields = []
    for rule in contract.fields.values():
        field: dict[str, Any] = {"name": rule.name, "doc": rule.description}
        if rule.required:
            field["type"] = avro_type(rule)
        else:
            field.update(type=["null", avro_type(rule)], default=None)
        fields.append(field)
    return {"type": "record", "name": contract.event_type, "namespace": NAMESPACE,
            "doc": str(contract.document.get("description", "")), "fields": fields}


def subject(topic: str, event_type: str) -> str:
    """The registry subject of an event type's schemas on ``topic``."""
    return f"{topic}-{NAMESPACE}.{event_type}"


def _registry_schema(contract: EventContract) -> Schema:
    return Schema(json.dumps(avro_schema(contract)), "AVRO")


def registry_client(settings: RegistrySettings, retries: bool = True) -> SchemaRegistryClient:
    """A client of the registry; ``retries=False``: a registry that does not answer is
    reported at once (the client otherwise retries for seconds)."""
    config: dict[str, str | int] = {**settings.client_config()}
    if not retries:
        config["max.retries"] = 0
    return SchemaRegistryClient(config)


@dataclass(frozen=True)
class RegisteredContract:
    subject: str
    version: int
    schema_id: int


def _versions(contracts: ContractRegistry, event_type: str) -> list[EventContract]:
    return [contracts.contracts[key] for key in sorted(contracts.contracts)
            if key[0] == event_type]


def register_contracts(client: SchemaRegistryClient, contracts: ContractRegistry, topic: str,
                       compatibility: str) -> list[RegisteredContract]:
    """Register every contract version under its subject, oldest first, with the subject's
    compatibility level set; idempotent (a schema the subject holds keeps its id). A version
    the registry refuses raises ``ContractError`` with the registry's reason."""
    registered = []
    for event_type in contracts.event_types:
        name = subject(topic, event_type)
        client.set_compatibility(name, compatibility)
        for contract in _versions(contracts, event_type):
            try:
                schema_id = client.register_schema(name, _registry_schema(contract))
            except SchemaRegistryError as error:
                raise ContractError(
                    f"{event_type} v{contract.version}: the schema registry refused it "
                    f"({compatibility}, HTTP {error.http_status_code}): {error.error_message}"
                ) from error
            registered.append(RegisteredContract(name, contract.version, schema_id))
    return registered


def registry_problems(client: SchemaRegistryClient, contracts: ContractRegistry,
                      topic: str) -> list[str]:
    """Contract versions the registry does not hold yet and would refuse under the subject's
    compatibility level (what ``register_contracts`` would fail on), without registering."""
    problems = []
    for event_type in contracts.event_types:
        name = subject(topic, event_type)
        for contract in _versions(contracts, event_type):
            schema = _registry_schema(contract)
            try:
                client.lookup_schema(name, schema)
                continue  # registered already
            except SchemaRegistryError as error:
                if error.error_code == SUBJECT_NOT_FOUND:
                    break  # a new subject: whatever it gets first is compatible
                if error.error_code != SCHEMA_NOT_FOUND:
                    raise
            if not client.test_compatibility(name, schema):
                level = client.get_compatibility(name)
                problems.append(f"{event_type} v{contract.version}: the schema registry would "
                                f"refuse it: not {level}-compatible with {name}'s latest version")
    return problems


def reader_schema(contracts: ContractRegistry, writer: str) -> str:
    """The schema a record written with ``writer`` is read as: the newest contract of its
    event type known here (the writer itself for an event type this reader does not know,
    so the record decodes and is then judged an unknown event type)."""
    event_type = json.loads(writer)["name"]
    if event_type not in contracts.event_types:
        return writer
    return json.dumps(avro_schema(contracts.latest(event_type)))


@dataclass(frozen=True)
class AvroSchemas:
    """What a reader of the events topic can decode: by writer schema id, the writer's
    schema and the reader schema it is read as (both Avro JSON)."""

    by_id: Mapping[int, tuple[str, str]]
    complete: bool
    """False when the registry did not answer: an id missing here may still exist."""

    def outdates(self, planned: AvroSchemas) -> bool:
        """Whether a plan made with ``planned`` must be made again now: a schema was
        registered since, or the plan was made without the registry's answer and one came.
        A registry that stops answering outdates nothing: the plan goes on decoding every
        id it knows (planning again then would know none)."""
        return self.by_id.keys() != planned.by_id.keys() or (
            self.complete and not planned.complete)


class TopicSchemas:
    """The schemas registered under the events topic's subjects, as a reader needs them.

    ``current`` asks the registry for the topic's subjects and their versions (a few small
    requests; a version once fetched is immutable and kept), so a version registered
    before a record was produced is known when that record is read, without a restart.
    """

    def __init__(self, settings: RegistrySettings, contracts: ContractRegistry,
                 topic: str) -> None:
        self.client = registry_client(settings, retries=False)  # asked every micro-batch
        self.contracts = contracts
        self.prefix = subject(topic, "")
        self._versions: dict[tuple[str, int], tuple[int, str, str]] = {}

    def current(self) -> AvroSchemas:
        try:
            for name in self.client.get_subjects():
                if not name.startswith(self.prefix):
                    continue
                for version in self.client.get_versions(name):
                    if (name, version) not in self._versions:
                        self._versions[(name, version)] = self._fetch(name, version)
        except (UNREACHABLE, SchemaRegistryError) as error:
            # a registry that answers with an error (5xx, refused credentials, a subject
            # deleted meanwhile) cannot say either: readers go on with the ids they know
            log.warning("schema registry: the events topic's schemas are not known anew: %s",
                        error)
            return AvroSchemas(self._by_id(), complete=False)
        return AvroSchemas(self._by_id(), complete=True)

    def _fetch(self, name: str, version: int) -> tuple[int, str, str]:
        registered = self.client.get_version(name, version)
        writer = registered.schema.schema_str if registered.schema else None
        assert registered.schema_id is not None and writer is not None
        return registered.schema_id, writer, reader_schema(self.contracts, writer)

    def _by_id(self) -> dict[int, tuple[str, str]]:
        return {schema_id: (writer, reader)
                for schema_id, writer, reader in self._versions.values()}


class AvroEventCodec:
    """Events to Confluent-framed Avro and back, with schemas from the registry.

    Writing, an event is encoded with the registered schema of its own contract version
    (looked up once; setup registers them). Reading, the writer schema comes by its id and
    the record is read as the newest contract of its event type this process knows.
    """

    def __init__(self, client: SchemaRegistryClient, contracts: ContractRegistry,
                 topic: str) -> None:
        self.client = client
        self.contracts = contracts
        self.topic = topic
        self._writers: dict[tuple[str, int], tuple[int, Any, frozenset[str]]] = {}
        self._readers: dict[int, tuple[Any, Any]] = {}

    def _writer(self, event_type: str, version: int) -> tuple[int, Any, frozenset[str]]:
        key = (event_type, version)
        if key not in self._writers:
            contract = self.contracts.contracts.get(key)
            if contract is None:
                raise ContractError(f"no contract for {event_type} v{version}")
            try:
                registered = self.client.lookup_schema(subject(self.topic, event_type),
                                                       _registry_schema(contract))
            except SchemaRegistryError as error:
                raise ContractError(
                    f"{event_type} v{version} is not registered ({error.error_message}): run "
                    "`lambdalake contracts register`") from error
            assert registered.schema_id is not None
            decimals = frozenset(name for name, rule in contract.fields.items()
                                 if _DECIMAL.match(rule.spark_type))
            self._writers[key] = (registered.schema_id,
                                  _parsed(json.dumps(avro_schema(contract))), decimals)
        return self._writers[key]

    def encode(self, event: Mapping[str, Any]) -> bytes:
        """The wire form of a valid event (check it against its contract first)."""
        schema_id, schema, decimals = self._writer(str(event["event_type"]),
                                                   int(event["schema_version"]))
        record = {name: Decimal(str(value)) if name in decimals and isinstance(value, float)
                  else value for name, value in event.items()}  # Avro decimals take Decimal
        body = io.BytesIO()
        body.write(_HEADER.pack(MAGIC_BYTE, schema_id))
        fastavro.schemaless_writer(body, schema, record)
        return body.getvalue()

    def decode(self, value: bytes) -> dict[str, Any]:
        """An event from its wire form, read as the newest contract of its type known here."""
        if len(value) < _HEADER.size or value[0] != MAGIC_BYTE:
            raise ContractError("not Confluent-framed Avro (no magic byte 0 and schema id)")
        _, schema_id = _HEADER.unpack_from(value)
        if schema_id not in self._readers:
            writer_text = self.client.get_schema(schema_id).schema_str
            assert writer_text is not None
            self._readers[schema_id] = (_parsed(writer_text),
                                        _parsed(reader_schema(self.contracts, writer_text)))
        writer, reader = self._readers[schema_id]
        decoded = fastavro.schemaless_reader(io.BytesIO(value[_HEADER.size:]), writer, reader)
        assert isinstance(decoded, dict)
        return decoded


@cache
def _parsed(schema_text: str) -> Any:
    return fastavro.parse_schema(json.loads(schema_text))



def event_encoder(settings: Settings) -> Callable[[Mapping[str, Any]], bytes]:
    """How the platform's producers write an event (``kafka.events_format``): JSON, or Avro
    with the schemas registered under the events topic."""
    if settings.kafka.events_format == "json":
        return encode_event
    return AvroEventCodec(registry_client(settings.registry), ContractRegistry(),
                          settings.kafka.events_topic.name).encode
