"""The library producer: idempotent, ``acks=all``, keyed, bounded, counted.

Applications hand it (key, value) pairs. Idempotence and ``acks=all`` make broker-side
retries safe (no duplicates, no reordering per partition); the key (the user id) keeps one
user's events in order on one partition; the local queue is bounded, so a slow broker
pushes back on the caller instead of growing memory; every delivery report is counted, so
the caller knows exactly what was acknowledged.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from confluent_kafka import KafkaError, Message, Producer

from lambdalake.contracts.registry import ContractRegistry, encode_event
from lambdalake.settings import KafkaSettings


@dataclass
class DeliveryCounts:
    """Delivery reports received so far."""

    acknowledged: int = 0
    failed: int = 0
    errors: dict[str, int] = field(default_factory=dict)

    @property
    def reported(self) -> int:
        return self.acknowledged + self.failed


def producer_config(kafka: KafkaSettings, **overrides: str | int
                    ) -> dict[str, str | int | float | bool]:
    """librdkafka settings for a safe producer; ``overrides`` may tune batching, not safety."""
    config: dict[str, str | int | float | bool] = {
        **kafka.client_config(),
        "enable.idempotence": True,
        "acks": "all",
        "compression.type": "lz4",
        "linger.ms": 20,
        "batch.size": 512 * 1024,
        "queue.buffering.max.messages": 200_000,
        "queue.buffering.max.kbytes": 256 * 1024,
        "delivery.timeout.ms": 120_000,
    }
    config.update(overrides)
    return config


class EventProducer:
    """A bounded, counted, idempotent producer for one topic."""

    def __init__(self, kafka: KafkaSettings, topic: str,
                 encode: Callable[[Mapping[str, Any]], bytes] = encode_event,
                 **overrides: str | int) -> None:
        """``encode`` turns an event into its wire form for ``send_event``: JSON, or the
        registry's Avro (``schema_registry.event_encoder``)."""
        self.topic = topic
        self.encode = encode
        self.counts = DeliveryCounts()
        self._producer = Producer(producer_config(kafka, **overrides))

    def _on_delivery(self, error: KafkaError | None, _message: Message) -> None:
        if error is None:
            self.counts.acknowledged += 1
        else:
            self.counts.failed += 1
            self.counts.errors[error.name()] = self.counts.errors.get(error.name(), 0) + 1

    def send(self, key: bytes | str | None, value: bytes | str | None,
             headers: Mapping[str, bytes] | None = None) -> None:
        """Queue one record; when the local queue is full, wait for the broker (back-pressure)."""
        wire_headers: dict[str, str | bytes | None] | None = {**headers} if headers else None
        while True:
            try:
                self._producer.produce(self.topic, value=value, key=key, headers=wire_headers,
                                       on_delivery=self._on_delivery)
                break
            except BufferError:
                self._producer.poll(0.1)
        self._producer.poll(0)

    def send_event(self, event: Mapping[str, Any], contracts: ContractRegistry) -> None:
        """Validate ``event`` against its contract, then send it keyed by its user."""
        contracts.validate(event)
        self.send(str(event["user_id"]), self.encode(event))

    def flush(self, timeout: float = 120.0) -> int:
        """Wait for outstanding deliveries; return how many are still unconfirmed."""
        return self._producer.flush(timeout)


@contextmanager
def stop_on_signals() -> Iterator[list[int]]:
    """Turn SIGINT/SIGTERM into a flag the produce loop checks, so it can flush and exit."""
    received: list[int] = []

    def handler(signum: int, _frame: FrameType | None) -> None:
        received.append(signum)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield received
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
