"""The speed layer as a component of the stack: one process per shard (``speed.shards``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lambdalake.settings import Settings
from lambdalake.speed.shards import Shard, shards
from lambdalake.stack.process import ManagedProcess
from lambdalake.streaming.progress import consumed_offsets
from lambdalake.streaming.service import StreamingService, wait_caught_up


def shard_service(settings: Settings, shard: Shard) -> StreamingService:
    """The process of one shard: ``spark_jobs/speed.py --shard <index>``."""
    return StreamingService(settings, shard.app, job="speed", args=["--shard", str(shard.index)])


class SpeedLayer:
    """Every shard's process, started and stopped together."""

    label = "speed layer (Kafka -> real-time views)"

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.services = {shard: shard_service(settings, shard) for shard in shards(settings)}

    @property
    def processes(self) -> list[ManagedProcess]:
        return [service.process for service in self.services.values()]

    def start(self, timeout: float = 180.0) -> list[int]:
        """Start the shards that do not run, all at once; wait until each reports progress;
        return their pids."""
        pids = [service.launch() for service in self.services.values()]
        for service in self.services.values():
            service.wait_ready(timeout)
        return pids

    def stop(self) -> bool:
        """Stop every shard gracefully; True if one was running."""
        return any([service.stop() for service in self.services.values()])


def wait_speed_caught_up(
    settings: Settings, timeout: float = 300.0,
    consumed: Callable[[dict[str, Any]], dict[str, int]] = consumed_offsets,
) -> dict[str, int]:
    """Wait until every shard has committed every record now in its partitions of the events
    topic; return the offsets waited for, per partition."""
    reached: dict[str, int] = {}
    for shard in shards(settings):
        owned = (None if not shard.assigned
                 else set(shard.partitions(settings.kafka.events_topic.partitions)))
        reached |= wait_caught_up(settings, shard.app, timeout, consumed=consumed,
                                  partitions=owned)
    return reached
