"""The 3-broker option: three KRaft nodes on one host form one cluster with replication."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient

from lambdalake.kafka.producer import EventProducer
from lambdalake.kafka.topics import ensure_topic
from lambdalake.settings import Settings, TopicSettings, isolated_environment
from lambdalake.stack.kafka_broker import KafkaCluster


@pytest.fixture(scope="module")
def cluster() -> Iterator[KafkaCluster]:
    with pytest.MonkeyPatch.context() as patch:
        for key, value in isolated_environment("test-cluster", port_prefix=3).items():
            patch.setenv(key, value)
        settings = Settings(broker={"count": 3, "first_port": 39092})
    kafka = KafkaCluster(settings)
    kafka.start()
    yield kafka
    kafka.stop()


def test_three_nodes_replicate_and_survive_one_loss(cluster: KafkaCluster) -> None:
    settings = cluster.settings
    assert settings.kafka.bootstrap_servers == "127.0.0.1:39092,127.0.0.1:39102,127.0.0.1:39112"
    assert cluster.live_brokers() == 3
    topic = TopicSettings(
        name=f"test.replicated.{uuid.uuid4().hex[:8]}", partitions=3,
        replication_factor=3, min_insync_replicas=2,
    )
    ensure_topic(settings.kafka, topic)
    metadata = AdminClient(settings.kafka.client_config()).list_topics(topic.name, timeout=10)
    for partition in metadata.topics[topic.name].partitions.values():
        assert sorted(partition.replicas) == [1, 2, 3]
        assert sorted(partition.isrs) == [1, 2, 3]

    cluster.nodes[2].process.kill()  # one broker down: min.insync.replicas=2 still holds
    producer = EventProducer(settings.kafka, topic.name, **{"message.timeout.ms": 60000})
    for n in range(500):
        producer.send(f"k{n}", str(n))
    assert producer.flush(90) == 0
    assert producer.counts.acknowledged == 500 and producer.counts.failed == 0
