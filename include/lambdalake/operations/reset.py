"""Resetting the speed layer: it forgets its output and progress and rebuilds from Kafka.

An operation across layers: it stops at the speed layer's and the query API's processes,
drops the real-time tables (their owner, ``RealtimeTable``, deletes them), and removes the
streams' checkpoints, status and history and the real-time gate's marks.
"""

from __future__ import annotations

from lambdalake.quality.realtime_gate import marks_path
from lambdalake.serving.service import ServingService
from lambdalake.settings import Settings
from lambdalake.speed.realtime import RealtimeTable
from lambdalake.speed.service import SpeedLayer
from lambdalake.speed.shards import APP, speed_checkpoints
from lambdalake.speed.supervisor import lag_samples_path
from lambdalake.streaming.progress import status_path
from lambdalake.views.definition import load_views


def reset_speed_layer(settings: Settings) -> list[str]:
    """Forget the speed layer's output and progress so it rebuilds the real-time views from
    Kafka (``ingest.starting_offsets``) when it starts next: its checkpoints, real-time
    tables, status, batch history and gate marks. Refuses while it or the query API runs;
    returns what it removed. The batch layer is untouched and answers every window it
    published."""

    running = [process.name for process in [*SpeedLayer(settings).processes,
                                            ServingService(settings).process]
               if process.pid() is not None]
    if running:
        raise RuntimeError(f"stop {' and '.join(running)} first (make down)")
    filesystem, checkpoints = speed_checkpoints(settings)
    status = status_path(settings, APP).parent  # every shard's, of any number of shards
    files = [path for path in dict.fromkeys((
        *status.glob(f"{APP}.json"), *status.glob(f"{APP}-*.json"),
        *status.glob(f"{APP}*-batches.jsonl"), marks_path(settings), lag_samples_path(settings),
    )) if path.exists()]
    for checkpoint in checkpoints:
        filesystem.delete_dir(checkpoint)
    tables = [RealtimeTable(settings, view).drop() for view in load_views().values()]
    for file in files:
        file.unlink()
    return checkpoints + [table for table in tables if table] + [str(file) for file in files]

