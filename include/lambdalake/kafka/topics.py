"""Create topics from settings, idempotently, and report any drift from what settings say."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from lambdalake.contracts.registry import EntityRegistry
from lambdalake.settings import KafkaSettings, TopicSettings


class TopicMismatch(RuntimeError):
    """An existing topic differs from its settings; Kafka cannot silently fix that."""


@dataclass(frozen=True)
class TopicState:
    """What ``ensure_topic`` found or did."""

    name: str
    created: bool


def topic_configs(topic: TopicSettings) -> dict[str, str]:
    """The topic-level configs settings decide (the optional ones only when set)."""
    optional = {"segment.ms": topic.segment_ms,
                "min.compaction.lag.ms": topic.min_compaction_lag_ms,
                "delete.retention.ms": topic.delete_retention_ms}
    return {
        "retention.ms": str(topic.retention_ms),
        "cleanup.policy": topic.cleanup_policy,
        "min.insync.replicas": str(topic.min_insync_replicas),
        **{key: str(value) for key, value in optional.items() if value is not None},
    }


def platform_topics(kafka: KafkaSettings, entities: EntityRegistry) -> list[TopicSettings]:
    """The events topic and each reference entity's compacted topic."""
    return [kafka.events_topic, *(kafka.entity_topic(entity) for entity in entities.entities)]


def ensure_platform_topics(kafka: KafkaSettings) -> list[TopicState]:
    return [ensure_topic(kafka, topic) for topic in platform_topics(kafka, EntityRegistry())]


def ensure_topic(kafka: KafkaSettings, topic: TopicSettings, timeout: float = 30.0) -> TopicState:
    """Create ``topic`` if missing; raise ``TopicMismatch`` if it exists with other settings."""
    admin = AdminClient(kafka.client_config())
    metadata = admin.list_topics(timeout=timeout)
    if topic.name not in metadata.topics:
        futures = admin.create_topics(
            [
                NewTopic(
                    topic.name,
                    num_partitions=topic.partitions,
                    replication_factor=topic.replication_factor,
                    config=topic_configs(topic),
                )
            ],
            operation_timeout=timeout,
        )
        try:
            futures[topic.name].result(timeout)
            return TopicState(topic.name, created=True)
        except KafkaException as error:  # created concurrently by someone else: check it
            if error.args[0].name() != "TOPIC_ALREADY_EXISTS":
                raise
    _check_matches(admin, topic, _metadata(admin, topic.name, timeout), timeout)
    return TopicState(topic.name, created=False)


def _metadata(admin: AdminClient, name: str, timeout: float) -> object:
    """The topic's metadata; right after a creation (ours, retried by the client, or someone
    else's) the broker may list the topic before its partitions, so that is retried."""
    deadline = time.monotonic() + timeout
    while True:
        found = admin.list_topics(topic=name, timeout=timeout).topics[name]
        if found.partitions or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def _describe(admin: AdminClient, name: str, timeout: float) -> dict[str, Any]:
    """The topic's configs; a topic created a moment ago may not be known to the broker's
    config handler yet (UNKNOWN_TOPIC_OR_PART), so that answer is retried until ``timeout``."""
    resource = ConfigResource(ResourceType.TOPIC, name)
    deadline = time.monotonic() + timeout
    while True:
        try:
            configs: dict[str, Any] = admin.describe_configs([resource])[resource].result(timeout)
            return configs
        except KafkaException as error:
            if error.args[0].name() != "UNKNOWN_TOPIC_OR_PART" or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _check_matches(admin: AdminClient, topic: TopicSettings, found: object, timeout: float) -> None:
    partitions = found.partitions  # type: ignore[attr-defined]
    problems = []
    if len(partitions) != topic.partitions:
        problems.append(f"partitions: settings {topic.partitions}, topic {len(partitions)}")
    replication = len(next(iter(partitions.values())).replicas) if partitions else 0
    if replication != topic.replication_factor:
        problems.append(
            f"replication factor: settings {topic.replication_factor}, topic {replication}"
        )
    described = _describe(admin, topic.name, timeout)
    for key, wanted in topic_configs(topic).items():
        actual = described[key].value if key in described else None
        if actual != wanted:
            problems.append(f"{key}: settings {wanted}, topic {actual}")
    if problems:
        raise TopicMismatch(
            f"topic {topic.name!r} exists but differs from its settings: "
            + "; ".join(problems)
            + ". Change the settings or migrate the topic; nothing was altered."
        )
