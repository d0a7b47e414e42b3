"""Produce a Nexmark stream to Kafka, as a domain of its own:

    python -m bench.nexmark.produce --events 1000000 --seed 0

Its events go to their own topic (``lambdalake.nexmark`` by default), as the platform's
producers send theirs: each validated against its contract (``bench/nexmark/events``), as
compact JSON (``encode_event``), through the library producer (idempotent, ``acks=all``,
bounded), keyed by the auction it is about (a person by its own id), so one auction's bids
stay in order on one partition. Kafka is the one the settings name (the local stack's
broker unless ``LAMBDALAKE_KAFKA__BOOTSTRAP_SERVERS`` says otherwise).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from bench.nexmark.domain import TOPIC_NAME, contracts
from bench.nexmark.generator import NexmarkConfig, NexmarkGenerator
from lambdalake.kafka.producer import EventProducer, stop_on_signals
from lambdalake.kafka.topics import ensure_topic
from lambdalake.settings import Settings, TopicSettings

TOPIC = TopicSettings(name=TOPIC_NAME)


def event_key(event: Mapping[str, Any]) -> str:
    """The Kafka key: the auction a bid or an auction is about, a person's own id."""
    return str(event["auction"] if event["event_type"] == "bid" else event["id"])


def produce(settings: Settings, config: NexmarkConfig, topic: TopicSettings = TOPIC) -> int:
    """Send the stream of ``config`` to ``topic``; the number of events Kafka acknowledged."""
    ensure_topic(settings.kafka, topic)
    registry = contracts()
    producer = EventProducer(settings.kafka, topic.name)
    with stop_on_signals() as stop:
        for event in NexmarkGenerator(config).events():
            if stop:
                break
            registry.validate(event)
            producer.send(event_key(event), producer.encode(event))
    producer.flush()
    return producer.counts.acknowledged


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=NexmarkConfig.events)
    parser.add_argument("--seed", type=int, default=NexmarkConfig.seed)
    parser.add_argument("--topic", default=TOPIC.name)
    args = parser.parse_args()
    config = NexmarkConfig(seed=args.seed, events=args.events)
    sent = produce(Settings(), config, TOPIC.model_copy(update={"name": args.topic}))
    print(f"{sent:,} of {config.events:,} Nexmark events acknowledged on {args.topic}")


if __name__ == "__main__":
    main()
