"""The speed layer's shards: instances that split the events topic's partitions among them,
the way Kafka Streams scales.

Shard ``i`` of ``n`` (``speed.shards``) owns the partitions ``p`` with ``p % n == i``. The
duplicates of an event share its key and therefore its partition, so each shard's
deduplication is exact on its own. Each shard is a process of its own with its own
checkpoints and counted-event state; all of them append partial aggregates to the same
real-time tables (partials combine by union, and each shard's appends are exactly once per
its own query id and batch id).

Watermarks are per shard: a shard's is the newest event time *of its partitions* minus the
lateness allowance, and it drops (and counts) the events older than that among its own
records. For the speed layer as a whole, a window is closed once every shard closed it:
its watermark is the slowest shard's, which is what the status shows, reconciliation
compares up to and ``/freshness`` reports (each shard beside it).

With one shard (the default) nothing of this shows: the process, its checkpoints and its
status keep the names they always had. Changing the number of shards changes which
partitions each checkpoint covers, so it needs ``lambdalake speed reset``.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lambdalake.lake.delta_rs import arrow_filesystem
from lambdalake.settings import Settings
from lambdalake.streaming.progress import read_status

if TYPE_CHECKING:
    from pyarrow import fs as pafs

APP = "speed"
SHARDED_CHECKPOINT = re.compile(r"-shard-\d+-of-(\d+)$")


@dataclass(frozen=True)
class Shard:
    """One speed-layer instance: which partitions it reads, and where it keeps its state."""

    index: int
    count: int

    @property
    def app(self) -> str:
        """Its process, status and batch history name."""
        return APP if self.count == 1 else f"{APP}-{self.index}"

    def describe(self) -> str:
        return "speed layer" if self.count == 1 else f"speed shard {self.index} of {self.count}"

    def checkpoint(self, query: str) -> str:
        """The checkpoint name of ``query`` in this shard (the counted-event state is in it)."""
        return query if self.count == 1 else f"{query}-shard-{self.index}-of-{self.count}"

    def partitions(self, partition_count: int) -> list[int]:
        """The partitions it owns of a topic with ``partition_count`` partitions."""
        if partition_count < self.count:
            raise ValueError(f"{self.count} speed shards need at least {self.count} partitions "
                             f"of the events topic; it has {partition_count}")
        return [p for p in range(partition_count) if p % self.count == self.index]

    @property
    def assigned(self) -> bool:
        """Whether it reads chosen partitions (else it subscribes to the whole topic)."""
        return self.count > 1


def shards(settings: Settings) -> list[Shard]:
    """Every shard of the speed layer, by index (one: the speed layer as it always was)."""
    return [Shard(index, settings.speed.shards) for index in range(settings.speed.shards)]


def speed_checkpoints(settings: Settings) -> tuple[pafs.FileSystem, list[str]]:
    """The filesystem of the checkpoint root and the paths of every speed query's checkpoint
    on it, of any shard and any number of shards."""
    from pyarrow import fs

    filesystem, root = arrow_filesystem(settings.checkpoint_path(""))
    found = filesystem.get_file_info(fs.FileSelector(root, allow_not_found=True))
    return filesystem, [info.path for info in found if info.type == fs.FileType.Directory
                        and info.base_name.startswith(f"{APP}_")]


def check_shard_layout(settings: Settings, shard: Shard) -> None:
    """Refuse to start beside checkpoints of another number of shards: they cover other
    partitions, and resuming (or starting afresh beside them) would count events twice."""
    _, checkpoints = speed_checkpoints(settings)
    other = sorted(name for name in (path.rsplit("/", 1)[-1] for path in checkpoints)
                   if shard_count_of(name) != shard.count)
    if other:
        raise RuntimeError(
            f"{shard.describe()}: the checkpoints {', '.join(other)} are of another number of "
            f"shards than speed.shards={shard.count}; stop the stack and run `lambdalake speed "
            "reset` (the real-time views are then rebuilt from Kafka)")


def shard_count_of(checkpoint: str) -> int:
    """How many shards the speed layer had that wrote checkpoint ``checkpoint`` (a name)."""
    match = SHARDED_CHECKPOINT.search(checkpoint)
    return int(match.group(1)) if match else 1


def speed_status(settings: Settings) -> dict[str, Any]:
    """The speed layer's status document. One shard's is its own; several shards' are
    merged: each view shows the slowest shard (the least watermark, the oldest newest
    batch), the sums (lag, late drops, event ids held, rates), every partition's offsets,
    and each shard's own figures under ``shards``. Empty while no shard has written one."""
    layout = shards(settings)
    if len(layout) == 1:
        return read_status(settings, APP) or {}
    documents = {shard.app: read_status(settings, shard.app) or {} for shard in layout}
    written = [document for document in documents.values() if document]
    if not written:
        return {}
    names = sorted({name for document in written for name in document.get("views", {})})
    views = {name: merge_view({app: document["views"][name]
                               for app, document in documents.items()
                               if name in document.get("views", {})}, len(layout))
             for name in names}
    reference = dict(written[0].get("reference") or {})
    reference["stale_joins"] = sum(int((d.get("reference") or {}).get("stale_joins") or 0)
                                   for d in written)
    return {
        "app": APP, "written_at": min(d["written_at"] for d in written),
        "active": len(written) == len(layout) and all(d.get("active") is True for d in written),
        "views": views, "reference": reference,
        "shards": {app: {"pid": d.get("pid"), "active": d.get("active"),
                         "written_at": d.get("written_at")} for app, d in documents.items()},
    }


def merge_view(entries: dict[str, dict[str, Any]], shard_count: int) -> dict[str, Any]:
    """One view's status entries of several shards (by app) as one: the slowest shard's
    progress, the sums of its counts (late rows per window too), the latest shard's
    ``complete_from``; a shard without an entry leaves time fields unknown."""
    values = list(entries.values())
    complete = len(values) == shard_count

    def least(key: str) -> Any:
        found = [entry[key] for entry in values if entry.get(key) is not None]
        return min(found) if complete and len(found) == len(values) else None

    def total(key: str) -> Any:
        found = [entry.get(key) for entry in values if entry.get(key) is not None]
        return sum(found) if found else None

    def union(key: str) -> dict[str, Any]:
        return {p: offset for entry in values for p, offset in (entry.get(key) or {}).items()}

    def latest(key: str) -> Any:
        found = [entry[key] for entry in values if entry.get(key) is not None]
        return max(found) if complete and len(found) == len(values) else None

    late_by_window: Counter[str] = Counter()
    for entry in values:
        late_by_window.update(entry.get("dropped_by_window") or {})

    return {
        "query": values[0]["query"],
        "active": complete and all(entry.get("active") is True for entry in values),
        "error": next((entry["error"] for entry in values if entry.get("error")), None),
        "written_at": min(entry["written_at"] for entry in values),
        "batch_id": least("batch_id"),
        "batch_timestamp": least("batch_timestamp"),
        "watermark": least("watermark"),
        **{key: total(key) for key in ("input_rows", "input_rows_per_second",
                                       "processed_rows_per_second", "lag", "state_rows",
                                       "dropped_by_watermark_total")},
        "batch_duration_ms": max((entry.get("batch_duration_ms") or 0) for entry in values),
        **{key: union(key) for key in ("end_offsets", "latest_offsets", "lag_per_partition")},
        "dropped_by_window": dict(sorted(late_by_window.items())),
        "complete_from": latest("complete_from"),
        "shards": {app: {key: entry.get(key) for key in (
            "batch_id", "batch_timestamp", "watermark", "lag", "dropped_by_watermark_total",
            "error")} for app, entry in sorted(entries.items())},
    }
