"""Deduplication and lateness for a speed query, in the driver, without a Spark state store.

A speed query counts an event the first time its ``event_id`` arrives, unless the event is
*late*: at or before the query's watermark, its newest event time of the earlier
micro-batches minus the lateness allowance (Spark's watermark rule). A late row is not
counted; it adds one to the late total of every view that reads its event type (exact per
view), and the batch layer counts it when it recomputes.

Spark's ``dropDuplicatesWithinWatermark`` did this before, but it evicts expired ids by
scanning its whole state in every micro-batch: measured at 0.4 µs per held id, in one task,
which at 5,000 events/s and a 10-minute allowance (3 million ids) is over a second per
micro-batch, and it needs a shuffle into the state's partitions. Here the ids are kept by
the micro-batch that counted them, and a micro-batch's ids are forgotten together once the
watermark passes its newest event time, so eviction costs what it evicts. (Spark expires
each id by its own event time; the two agree because copies of an event share its
``occurred_at``: a copy arriving after its id was forgotten is late.)

The state is as durable as the stream's progress, and lives where the checkpoint does (a
local path or object storage), so a driver restarted on another host finds both. Batch
``N``'s counted ids, its newest event time, the newest event time so far and the running
late totals are one Arrow file, ``<checkpoint>/seen/<N>.arrow``, written (atomically: a
temporary file moved into place) after the batch's views are appended and before Spark
commits the batch. Batch ``N`` always starts from the files of the batches
before it, and a forgotten batch's file is deleted only once the batch that passed it is
committed, so a batch replayed after a crash counts exactly the events its first attempt
counted.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lambdalake.views.definition import ViewDefinition

if TYPE_CHECKING:
    import pyarrow as pa

_BATCH_NEWEST = b"batch_newest_event_time_us"
_NEWEST = b"newest_event_time_us"
_LATE = b"late_totals"


class StateMissingError(RuntimeError):
    """A checkpoint has committed batches but no deduplication state beside them."""


def state_directory(checkpoint: str) -> str:
    """Where a query keeps its deduplication state: inside its Spark checkpoint (a
    checkpoint reset resets both)."""
    from pyarrow import fs

    from lambdalake.lake.delta_rs import arrow_filesystem

    directory = f"{checkpoint.rstrip('/')}/seen"
    filesystem, root = arrow_filesystem(checkpoint)
    commits, seen = filesystem.get_file_info([f"{root}/commits", f"{root}/seen"])
    if commits.type == fs.FileType.Directory and seen.type != fs.FileType.Directory:
        raise StateMissingError(
            f"{checkpoint} has committed batches but no deduplication state ({directory}): "
            "it comes from a speed layer that deduplicated in Spark, and resuming it would "
            "count recent duplicates again. Stop the stack and run `lambdalake speed reset`."
        )
    return directory


@dataclass(frozen=True)
class Admission:
    """What one micro-batch brings: the events to count now, and what the state keeps."""

    batch_id: int
    events: pa.Table
    counted_ids: list[str]
    newest_us: int | None  # the batch's newest event time, µs since the epoch
    late: Counter[str]  # late rows per view


class SeenEvents:
    """The event ids one speed query has counted, kept until its watermark passes them."""

    def __init__(self, directory: str | Path, views: Iterable[ViewDefinition]) -> None:
        from lambdalake.lake.delta_rs import arrow_filesystem

        views = list(views)
        self.filesystem, self.directory = arrow_filesystem(str(directory))
        self.event_time = views[0].event_time
        self.lateness_us = views[0].lateness_seconds * 1_000_000
        self.view_types = {view.name: set(view.event_types) for view in views}
        self._lock = threading.Lock()
        self.filesystem.create_dir(self.directory)  # present from the first start on
        self._restore(None)  # all of it, for the status; the first batch checks its start

    def _clear(self, next_batch: int) -> None:
        self._ids: set[str] = set()
        self._batches: dict[int, tuple[int, list[str]]] = {}
        self._newest_us: int | None = None
        self._late_totals: Counter[str] = Counter()
        self._next_batch = next_batch
        self._passed: list[int] = []  # forgotten batches whose files a replay may still need

    def _restore(self, batch_id: int | None) -> None:
        """The state before ``batch_id`` (``None``: after the last file): the files of
        earlier batches. Later ones are from an attempt that Spark did not commit, so that
        batch runs again; a ``.tmp`` file is a write a crash cut short."""
        import pyarrow as pa
        from pyarrow import fs

        self._clear(next_batch=-1)
        files = self.filesystem.get_file_info(fs.FileSelector(self.directory))
        for info in files:
            if info.extension == "tmp":
                self.filesystem.delete_file(info.path)
        for info in sorted((info for info in files if info.extension == "arrow"),
                           key=lambda info: info.base_name):  # in batch order
            stored = int(info.base_name.removesuffix(".arrow"))
            if batch_id is not None and stored >= batch_id:
                self.filesystem.delete_file(info.path)
                continue
            with self.filesystem.open_input_file(info.path) as source:
                table = pa.ipc.open_file(source).read_all()
            metadata = table.schema.metadata
            self._keep(stored, int(metadata[_BATCH_NEWEST]), table.column("event_id").to_pylist())
            self._newest_us = int(metadata[_NEWEST])
            self._late_totals = Counter(json.loads(metadata[_LATE]))
            self._next_batch = stored + 1
        if batch_id is not None:
            self._next_batch = batch_id
        self._forget_passed()

    def _keep(self, batch_id: int, newest_us: int, ids: list[str]) -> None:
        self._ids.update(ids)
        self._batches[batch_id] = (newest_us, ids)
        if self._newest_us is None or newest_us > self._newest_us:
            self._newest_us = newest_us  # the running maximum is also in each file

    @property
    def watermark_us(self) -> int | None:
        return None if self._newest_us is None else self._newest_us - self.lateness_us

    def admit(self, events: pa.Table, batch_id: int) -> Admission:
        """Split micro-batch ``batch_id`` into the events to count and the late rows. The
        ids it counts are kept only by ``record``; before that, the state is brought to
        where this batch starts (after a restart or for a replay), and the files of batches
        forgotten before it, all committed now, are deleted."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if batch_id != self._next_batch:  # the first batch of this run, or a replay
            with self._lock:
                self._restore(batch_id)
        self._delete_passed()  # every earlier batch is committed now
        times = events.column(self.event_time).cast(pa.timestamp("us")).cast(pa.int64())
        watermark = self.watermark_us
        late = (pc.less_equal(times, watermark).to_pylist() if watermark is not None
                else [False] * events.num_rows)
        counted: list[str] = []
        seen_here: set[str] = set()
        keep: list[bool] = []
        for event_id, is_late in zip(events.column("event_id").to_pylist(), late, strict=True):
            first = not is_late and event_id not in self._ids and event_id not in seen_here
            if first:
                seen_here.add(event_id)
                counted.append(event_id)
            keep.append(first)
        late_types = Counter(t for t, is_late in zip(
            events.column("event_type").to_pylist(), late, strict=True) if is_late)
        newest = pc.max(times).as_py()
        return Admission(
            batch_id, events.filter(pa.array(keep, pa.bool_())), counted, newest,
            Counter({view: sum(late_types[t] for t in types)
                     for view, types in self.view_types.items()}),
        )

    def record(self, admission: Admission) -> None:
        """Keep a batch's counted ids (once its views are appended), then forget the
        batches the watermark has passed."""
        import pyarrow as pa

        totals = Counter({view: 0 for view in self.view_types} | self._late_totals)
        totals.update(admission.late)
        if admission.newest_us is not None:  # a batch with rows: written, even if all late
            newest = (admission.newest_us if self._newest_us is None
                      else max(admission.newest_us, self._newest_us))
            table = pa.table({"event_id": pa.array(admission.counted_ids, pa.string())})
            table = table.replace_schema_metadata({
                _BATCH_NEWEST: str(admission.newest_us), _NEWEST: str(newest),
                _LATE: json.dumps(totals)})
            path = self._file(admission.batch_id)
            partial = path.removesuffix(".arrow") + ".tmp"
            with (self.filesystem.open_output_stream(partial) as sink,
                  pa.ipc.new_file(sink, table.schema) as out):
                out.write_table(table)
            self.filesystem.move(partial, path)
        with self._lock:
            if admission.newest_us is not None:
                self._keep(admission.batch_id, admission.newest_us, admission.counted_ids)
            self._late_totals = totals
            self._next_batch = admission.batch_id + 1
            self._forget_passed()

    def _forget_passed(self) -> None:
        """Forget the batches whose ids are all at or before the watermark (except the
        newest, which holds the late totals). Their files go once the batch that moved the
        watermark is committed: a replay of it must start from them."""
        watermark = self.watermark_us
        if watermark is None:
            return
        newest_batch = max(self._batches)
        for batch_id, (newest_us, ids) in list(self._batches.items()):
            if newest_us <= watermark and batch_id != newest_batch:
                self._ids.difference_update(ids)
                del self._batches[batch_id]
                self._passed.append(batch_id)

    def _delete_passed(self) -> None:
        for batch_id in self._passed:
            try:
                self.filesystem.delete_file(self._file(batch_id))
            except FileNotFoundError:
                pass  # deleted before a restart
        self._passed.clear()

    def _file(self, batch_id: int) -> str:
        return f"{self.directory}/{batch_id:012d}.arrow"

    def status(self) -> dict[str, Any]:
        """Watermark (as Spark reports one), ids held, and the late rows per view so far."""
        with self._lock:
            watermark = self.watermark_us
            return {
                "watermark": None if watermark is None else (
                    datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=watermark)
                ).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
                "state_rows": len(self._ids),
                "dropped_by_watermark_total": dict(self._late_totals),
            }
