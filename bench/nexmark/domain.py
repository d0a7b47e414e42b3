"""The Nexmark domain as the platform reads it: its contracts, its views, and its events as
the typed rows both layers aggregate (bronze's columns: the contracts' fields and the
Kafka coordinates the ordered kinds, such as q16's ``last``, break ties by)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

from lambdalake.contracts.registry import ContractRegistry
from lambdalake.views.definition import ViewDefinition, load_views

NEXMARK_DIR = Path(__file__).parent
EVENTS_DIR = NEXMARK_DIR / "events"
VIEWS_DIR = NEXMARK_DIR / "views"
ARROW_TYPES = {"STRING": pa.string(), "BIGINT": pa.int64()}
KAFKA_COLUMNS = [("kafka_timestamp", pa.timestamp("us", tz="UTC")), ("topic", pa.string()),
                 ("partition", pa.int32()), ("offset", pa.int64())]
TOPIC_NAME = "lambdalake.nexmark"


def contracts() -> ContractRegistry:
    """The Nexmark domain's event contracts (``bench/nexmark/events``)."""
    return ContractRegistry(EVENTS_DIR)


def views() -> dict[str, ViewDefinition]:
    """The Nexmark queries as views, checked against the domain's contracts, by query
    number (q1, q2, q5, ... rather than the files' order, q1, q14, q15, ...)."""
    loaded = load_views(VIEWS_DIR, contracts())
    return {name: loaded[name] for name in sorted(loaded, key=lambda n: int(n.rsplit("q")[-1]))}


def arrow_schema(registry: ContractRegistry) -> pa.Schema:
    """Every field of the domain's contracts as the layers read it (``occurred_at`` a UTC
    instant, the others by their contract's Spark type), and the Kafka coordinates."""
    return pa.schema([
        *((name, pa.timestamp("us", tz="UTC") if name == "occurred_at"
           else ARROW_TYPES[rule.spark_type]) for name, rule in registry.all_fields().items()),
        *KAFKA_COLUMNS])


def typed_rows(events: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The events with their event time parsed, as ingest reads them into bronze after the
    producer sent them in order, each at its event time, to one partition."""
    rows = []
    for offset, event in enumerate(events):
        at = datetime.fromisoformat(event["occurred_at"])
        rows.append({**event, "occurred_at": at, "kafka_timestamp": at, "topic": TOPIC_NAME,
                     "partition": 0, "offset": offset})
    return rows
