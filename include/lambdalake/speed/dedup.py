"""Deduplication and lateness for a speed query, in the driver, without a Spark state store.

A speed query counts an event the first time its ``event_id`` arrives, unless the event is
*late*: at or before the query's watermark, its newest event time of the earlier
micro-batches minus the lateness allowance (Spark's watermark rule), where no event time
counts as later than the wall clock plus a bound (``ingest.max_future_skew_seconds``): a
producer whose clock runs ahead cannot make everyone else's events late. A late row is not
counted; it adds one to the late total of every view that reads its event type (exact per
view), and to that view's count for the event's window, and the batch layer counts it when
it recomputes. The per-window counts say which real-time rows are short of the truth (the
serving layer's ``complete``); they are kept for the windows of the ``horizon`` before the
watermark (older events are quarantined as too old, never late).

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
``N``'s counted ids, its newest event time, the newest event time so far, the oldest event
time of the state's first batch, and the running late totals (per view and per view and
window) are one Arrow file, ``<checkpoint>/seen/<N>.arrow``, written (atomically: a
temporary file moved into place) after the batch's views are appended and before Spark
commits the batch. Batch ``N`` always starts from the files of the batches
before it, and a forgotten batch's file is deleted only once the batch that passed it is
committed, so a batch replayed after a crash counts exactly the events its first attempt
counted.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lambdalake.timeutil import epoch_microseconds, from_epoch_microseconds
from lambdalake.views.definition import ViewDefinition

if TYPE_CHECKING:
    import pyarrow as pa

_BATCH_NEWEST = b"batch_newest_event_time_us"
_NEWEST = b"newest_event_time_us"
_LATE = b"late_totals"
_LATE_WINDOWS = b"late_by_window"
_FIRST = b"first_event_time_us"

log = logging.getLogger(__name__)


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
    advances_to_us: int | None  # how far it moves the newest event time: ``clock_bound``
    oldest_us: int | None  # its oldest
    late: Counter[str]  # late rows per view
    late_windows: dict[str, Counter[int]]  # late rows per view and window start (µs)


class SeenEvents:
    """The event ids one speed query has counted, kept until its watermark passes them."""

    def __init__(self, directory: str | Path, views: Iterable[ViewDefinition],
                 horizon: timedelta | None = None, counts_from_start: bool = False,
                 clock_bound: timedelta | None = None,
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        """``horizon``: how far before the watermark a window's late count is kept (None:
        every window's); ``counts_from_start``: the query began at the topic's newest offset,
        so windows before its first batch's oldest event are not whole; ``clock_bound``: how
        far ahead of ``clock`` an event time may move the watermark (None: unbounded)."""
        from lambdalake.lake.delta_rs import arrow_filesystem

        views = list(views)
        self.filesystem, self.directory = arrow_filesystem(str(directory))
        self.event_time = views[0].event_time
        self.lateness_us = views[0].lateness_seconds * 1_000_000
        self.view_types = {view.name: set(view.event_types) for view in views}
        self.views = {view.name: view for view in views}
        self.horizon_us = None if horizon is None else horizon // timedelta(microseconds=1)
        self.counts_from_start = counts_from_start
        self.clock_bound_us = (None if clock_bound is None
                               else clock_bound // timedelta(microseconds=1))
        self.clock = clock
        self._lock = threading.Lock()
        self.filesystem.create_dir(self.directory)  # present from the first start on
        self._restore(None)  # all of it, for the status; the first batch checks its start

    def _clear(self, next_batch: int) -> None:
        self._ids: set[str] = set()
        self._batches: dict[int, tuple[int, list[str]]] = {}
        self._newest_us: int | None = None
        self._late_totals: Counter[str] = Counter()
        self._late_windows: dict[str, Counter[int]] = {}
        self._first_us: int | None = None
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
            self._newest_us = int(metadata[_NEWEST])  # the running maximum, bounded
            self._late_totals = Counter(json.loads(metadata[_LATE]))
            self._late_windows = {view: Counter({int(start): n for start, n in counts.items()})
                                  for view, counts in json.loads(
                                      metadata.get(_LATE_WINDOWS, b"{}")).items()}
            first = metadata.get(_FIRST)  # absent in files of an earlier version
            self._first_us = int(first) if first else self._first_us
            self._next_batch = stored + 1
        if batch_id is not None:
            self._next_batch = batch_id
        self._forget_passed()

    def _keep(self, batch_id: int, newest_us: int, ids: list[str]) -> None:
        self._ids.update(ids)
        self._batches[batch_id] = (newest_us, ids)

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
        late_mask = pa.array(late, pa.bool_())
        late_rows = list(zip(events.column("event_type").filter(late_mask).to_pylist(),
                             times.filter(late_mask).to_pylist(), strict=True))
        late_times = {view: [time for event_type, time in late_rows if event_type in types]
                      for view, types in self.view_types.items()}
        late_windows = {view: Counter(start for moment in moments
                                      for start in self.views[view].window_starts(moment))
                        for view, moments in late_times.items()}  # a row in each of its windows
        newest = pc.max(times).as_py()
        return Admission(
            batch_id, events.filter(pa.array(keep, pa.bool_())), counted, newest,
            self._bounded(newest), pc.min(times).as_py(),
            Counter({view: len(moments) for view, moments in late_times.items()}),
            {view: counts for view, counts in late_windows.items() if counts},
        )

    def _bounded(self, newest_us: int | None) -> int | None:
        """``newest_us``, but no later than the wall clock plus ``clock_bound``: a producer
        whose clock runs ahead would otherwise move the watermark past everyone's on-time
        events, which would all be dropped as late until real time caught up. Its events
        still count; they only do not move the watermark further. (The batch's own newest
        time, which decides when its ids are forgotten, stays as it is.)"""
        if newest_us is None or self.clock_bound_us is None:
            return newest_us
        bound = epoch_microseconds(self.clock()) + self.clock_bound_us
        if newest_us > bound:
            log.warning("events up to %s ahead of the clock: the watermark moves to %s only",
                        timedelta(microseconds=newest_us - bound + self.clock_bound_us),
                        _instant(bound - self.lateness_us))
        return min(newest_us, bound)

    def record(self, admission: Admission) -> None:
        """Keep a batch's counted ids (once its views are appended), then forget the
        batches the watermark has passed."""
        import pyarrow as pa

        totals = Counter({view: 0 for view in self.view_types} | self._late_totals)
        totals.update(admission.late)
        first = self._first_us if self._first_us is not None else admission.oldest_us
        newest = max((t for t in (admission.advances_to_us, self._newest_us) if t is not None),
                     default=None)
        windows = self._late_windows_after(admission.late_windows, newest)
        if admission.newest_us is not None:  # a batch with rows: written, even if all late
            table = pa.table({"event_id": pa.array(admission.counted_ids, pa.string())})
            table = table.replace_schema_metadata({
                _BATCH_NEWEST: str(admission.newest_us), _NEWEST: str(newest),
                _LATE: json.dumps(totals), _FIRST: str(first),
                _LATE_WINDOWS: json.dumps({view: {str(start): n for start, n in counts.items()}
                                           for view, counts in windows.items()})})
            path = self._file(admission.batch_id)
            partial = path.removesuffix(".arrow") + ".tmp"
            with (self.filesystem.open_output_stream(partial) as sink,
                  pa.ipc.new_file(sink, table.schema) as out):
                out.write_table(table)
            self.filesystem.move(partial, path)
        with self._lock:
            if admission.newest_us is not None:
                self._keep(admission.batch_id, admission.newest_us, admission.counted_ids)
            self._newest_us = newest
            self._late_totals = totals
            self._late_windows = windows
            self._first_us = first
            self._next_batch = admission.batch_id + 1
            self._forget_passed()

    def _late_windows_after(self, added: dict[str, Counter[int]],
                            newest_us: int | None) -> dict[str, Counter[int]]:
        """The per-window late counts with ``added``, without the windows that ended
        ``horizon`` or longer before the watermark ``newest_us`` gives."""
        windows = {view: Counter(counts) for view, counts in self._late_windows.items()}
        for view, counts in added.items():
            windows.setdefault(view, Counter()).update(counts)
        if self.horizon_us is None or newest_us is None:
            return windows
        oldest = newest_us - self.lateness_us - self.horizon_us
        return {view: kept for view, counts in windows.items()
                if (kept := Counter({start: n for start, n in counts.items()
                                     if start + self.views[view].grain_seconds * 1_000_000
                                     > oldest}))}

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

    def complete_from_us(self) -> int | None:
        """The earliest window start whose real-time rows can be whole: the horizon before
        the watermark (older windows' late counts are not kept), and with
        ``counts_from_start`` the first batch's oldest event (nothing before it was read)."""
        watermark = self.watermark_us
        bounds = [watermark - self.horizon_us
                  if self.horizon_us is not None and watermark is not None else None,
                  self._first_us if self.counts_from_start else None]
        known = [bound for bound in bounds if bound is not None]
        return max(known) if known else None

    def status(self) -> dict[str, Any]:
        """Watermark (as Spark reports one), ids held, the late rows per view so far, each
        view's late rows per window (by window start), and from where windows can be whole."""
        with self._lock:
            return {
                "watermark": _instant(self.watermark_us),
                "state_rows": len(self._ids),
                "dropped_by_watermark_total": dict(self._late_totals),
                "dropped_by_window": {
                    view: {_instant(start): n for start, n in sorted(counts.items())}
                    for view, counts in self._late_windows.items()},
                "complete_from": _instant(self.complete_from_us()),
            }


def _instant(microseconds: int | None) -> str | None:
    """Microseconds since the epoch as ISO-8601 UTC to the millisecond, as Spark reports."""
    if microseconds is None:
        return None
    moment = from_epoch_microseconds(microseconds)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
