"""The 3-broker option: three KRaft nodes on one host form one cluster with replication,
which keeps every acknowledged record through the loss of one node and refuses writes,
loudly, once fewer than ``min.insync.replicas`` remain."""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient

from lambdalake.kafka.producer import EventProducer, producer_config
from lambdalake.kafka.topics import ensure_topic
from lambdalake.settings import Settings, TopicSettings, isolated_environment
from lambdalake.stack.kafka_broker import KafkaCluster


@pytest.fixture(scope="module")
def cluster() -> Iterator[KafkaCluster]:
    with pytest.MonkeyPatch.context() as patch:
        for key, value in isolated_environment("test-cluster", slot=3).items():
            patch.setenv(key, value)
        settings = Settings(broker={"count": 3})
    kafka = KafkaCluster(settings)
    kafka.start()
    yield kafka
    kafka.stop()


def test_three_nodes_replicate_and_survive_one_loss(cluster: KafkaCluster) -> None:
    settings = cluster.settings
    assert settings.kafka.bootstrap_servers == "127.0.0.1:23092,127.0.0.1:23102,127.0.0.1:23112"
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


def produce_in_thread(producer: Producer, topic: str, values: range, rate: float,
                      acknowledged: list[int], failed: list[str]) -> threading.Thread:
    """Send ``values`` at ``rate`` per second from a thread; record each verdict."""

    def on_delivery(error: KafkaError | None, message: Message) -> None:
        if error is None:
            acknowledged.append(int(message.value()))
        else:
            failed.append(error.name())

    def send() -> None:
        started = time.monotonic()
        for n, value in enumerate(values):
            producer.produce(topic, key=f"k{value}", value=str(value), on_delivery=on_delivery)
            producer.poll(0)
            time.sleep(max(0.0, started + n / rate - time.monotonic()))

    thread = threading.Thread(target=send)
    thread.start()
    return thread


@pytest.mark.chaos
def test_under_load_one_loss_is_absorbed_and_two_fail_loudly_losing_nothing_acked(
    cluster: KafkaCluster,
) -> None:
    settings = cluster.settings
    cluster.start()  # every node up again (the test above took one down)
    topic = TopicSettings(name=f"test.chaos.{uuid.uuid4().hex[:8]}", partitions=3,
                          replication_factor=3, min_insync_replicas=2)
    ensure_topic(settings.kafka, topic)
    acknowledged: list[int] = []
    failed: list[str] = []

    patient = Producer(producer_config(settings.kafka, **{"delivery.timeout.ms": 90_000}))
    sending = produce_in_thread(patient, topic.name, range(20_000), 4_000, acknowledged, failed)
    time.sleep(1)
    cluster.nodes[2].process.kill()  # one of three down mid-load: a new leader, acks=all holds
    sending.join()
    assert patient.flush(120) == 0
    assert failed == [] and sorted(acknowledged) == list(range(20_000))

    cluster.nodes[1].process.kill()  # two down: fewer than min.insync.replicas remain
    hasty = Producer(producer_config(settings.kafka, **{"delivery.timeout.ms": 10_000,
                                                        "request.timeout.ms": 5_000}))
    produce_in_thread(hasty, topic.name, range(20_000, 21_000), 1_000, acknowledged,
                      failed).join()
    assert hasty.flush(60) == 0, "a record neither acknowledged nor failed"
    assert len(acknowledged) + len(failed) == 21_000
    assert failed, "writes below min.insync.replicas were acknowledged"
    assert set(failed) <= {"_MSG_TIMED_OUT", "NOT_ENOUGH_REPLICAS", "REQUEST_TIMED_OUT",
                           "NOT_ENOUGH_REPLICAS_AFTER_APPEND"}, failed

    cluster.start()  # the lost nodes come back with their logs; nothing acked is missing
    read = read_all(settings, topic.name, until_seen=set(acknowledged))
    missing = set(acknowledged) - set(read)
    assert not missing, f"{len(missing)} acknowledged records are lost"
    assert all(read[value] == 1 for value in acknowledged), "an acknowledged record twice"


def read_all(settings: Settings, topic: str, until_seen: set[int],
             timeout: float = 120, quiet: float = 5) -> Counter[int]:
    """How often each value of ``topic`` occurs, read from the beginning until every value
    of ``until_seen`` arrived (or ``timeout``) and then until nothing came for ``quiet``
    seconds: counting records instead would stop early whenever unacknowledged writes
    that did land stand in for a partition's unread tail."""
    consumer = Consumer({**settings.kafka.client_config(), "group.id": uuid.uuid4().hex,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    read: Counter[int] = Counter()
    deadline = time.monotonic() + timeout
    try:
        while not until_seen <= read.keys() and time.monotonic() < deadline:
            read.update(int(m.value()) for m in consumer.consume(1000, timeout=1)
                        if m.error() is None)
        while batch := consumer.consume(1000, timeout=quiet):  # duplicates beyond them
            read.update(int(m.value()) for m in batch if m.error() is None)
    finally:
        consumer.close()
    return read
