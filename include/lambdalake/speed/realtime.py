"""The real-time views: one Delta table per view, written by the speed layer, read by serving.

Each micro-batch of the speed layer yields, for every (window, dimensions) key it touched,
the partial aggregates of that batch's events (``lambdalake.speed.partials``: a key's value
is its rows combined). ``RealtimeTable.append`` appends them, stamped with the batch id and the
time of the write, in one Delta commit that also records the batch as the query's
transaction version (Delta's ``txn`` action: app id = the query's id, version = the batch
id): a batch replayed after a crash is skipped if it committed, and written once if it did
not, so every batch's partials are in the table exactly once (the table stays open between
micro-batches). A replayed batch holds the same events as its first attempt (its offsets
are in the checkpoint, and the deduplication state it starts from is that of the batches
before it: ``lambdalake.speed.dedup``), so the views a crash interrupted between two
commits get the same partials the others got.

The rows of a micro-batch are few (the keys it touched), so they are collected to the
driver as Arrow and committed with delta-rs: a commit then costs milliseconds, where a
Spark Delta write costs a job (about a second on two cores), which is most of a
micro-batch's time at low latency.

Tables are partitioned by ``window_start`` like the batch views, so retiring or compacting
closed windows (the serving step's job) never conflicts with the stream's appends to open
ones. ``RealtimeTable`` is the one owner of these tables: their path, the speed layer's
appends, the serving step's collapse and retirement, the reads of every layer, and the
reset's drop all go through it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from lambdalake.lake.commits import retry_on_conflict
from lambdalake.lake.delta_rs import FollowedTable, arrow_filesystem, delta_rs_uri
from lambdalake.settings import Settings
from lambdalake.speed.partials import kind_merged_measures, merge_partials, with_estimates
from lambdalake.views.definition import ViewDefinition

WRITER_COLUMNS = ("batch_id", "shard")
"""Which micro-batch of which speed shard wrote a row: not part of a view's value."""

if TYPE_CHECKING:
    import pyarrow as pa
    from deltalake import DeltaTable


def realtime_table(view: ViewDefinition | str) -> str:
    name = view if isinstance(view, str) else view.name
    return f"realtime_{name}"


class RealtimeFormatError(RuntimeError):
    """A real-time table an earlier speed layer wrote in another format."""


class RealtimeTable:
    """One view's real-time table, and every read and write of it.

    The speed layer keeps one open between micro-batches: it catches up with the commits
    made since (its own and the serving step's) before each append, where opening the table
    by path replays up to a hundred commit files, and an append did that twice (about 50 ms
    per view and micro-batch at 5,000 events/s, growing until the next checkpoint)."""

    def __init__(self, settings: Settings, view: ViewDefinition) -> None:
        self.view = view
        self.path = settings.table_path(realtime_table(view))
        self.uri = delta_rs_uri(self.path)
        self.followed = FollowedTable(self.path)

    def follow(self) -> FollowedTable:
        """A new follower of this table, for a reader that keeps its own place."""
        return FollowedTable(self.path)

    def _table(self) -> DeltaTable | None:
        from deltalake import DeltaTable

        return DeltaTable(self.uri) if DeltaTable.is_deltatable(self.uri) else None

    def append(self, rows: pa.Table, app_id: str, batch_id: int, shard: int = 0) -> bool:
        """Append ``rows`` as batch ``batch_id`` of ``app_id`` (speed shard ``shard``),
        exactly once per (app_id, batch_id); an append that lost a race with another
        shard's or the serving step's commit is tried again from the newer version (it
        committed nothing). A table written before shards existed gains the ``shard``
        column with the first append of this version (its older rows have none).

        Returns False when there was nothing to write: no rows (a batch that touched no key
        of this view), or the batch had committed before (a replay after a crash)."""
        import pyarrow as pa
        from deltalake import CommitProperties, Transaction, write_deltalake

        if rows.num_rows == 0:
            return False
        now = pa.scalar(datetime.now(UTC), pa.timestamp("us", tz="UTC"))
        rows = rows.append_column("batch_id", pa.array([batch_id] * rows.num_rows, pa.int64()))
        rows = rows.append_column("shard", pa.array([shard] * rows.num_rows, pa.int32()))
        rows = utc_timestamps(
            rows.append_column("updated_at", pa.array([now] * rows.num_rows, now.type)))

        def append_once() -> bool:
            table = self.followed.table if self.followed.refresh() is not None else None
            committed = table.transaction_version(app_id) if table is not None else None
            if committed is not None and committed >= batch_id:
                return False
            write_deltalake(
                table if table is not None else self.followed.uri, rows, mode="append",
                schema_mode="merge", partition_by=["window_start"],
                commit_properties=CommitProperties(
                    app_transactions=[Transaction(app_id, batch_id)]),
            )
            return True

        return retry_on_conflict(append_once)

    def partials(self, updated_after: datetime | None = None) -> pa.Table | None:
        """The partial rows as written (only those written after ``updated_after``, if
        given); None while the table does not exist."""
        import pyarrow.compute as pc

        table = self._table()
        if table is None:
            return None
        if updated_after is None:
            return table.to_pyarrow_table()
        return table.to_pyarrow_dataset().to_table(filter=pc.field("updated_at") > updated_after)

    def current_rows(self) -> pa.Table | None:
        """Each key's value now (partials combined, distinct counts estimated); None while
        the table does not exist."""
        rows = self.partials()
        if rows is None:
            return None
        return with_estimates(merge_partials(rows, self.view), self.view).drop_columns(
            [column for column in WRITER_COLUMNS if column in rows.schema.names])

    def format_problem(self) -> str | None:
        """Why the speed layer cannot append to this table, if an earlier speed layer wrote
        it as each key's value (a distinct count as a number) instead of partials."""
        table = self._table()
        if table is None:
            return None
        types = {f.name: getattr(f.type, "type", None) for f in table.schema().fields}
        unserialized = [m.name for m in kind_merged_measures(self.view)
                        if not m.measure_kind.ordered and types.get(m.name) != "binary"]
        if not unserialized:
            return None
        return (f"{realtime_table(self.view)} was written by an earlier speed layer "
                f"({', '.join(unserialized)} are numbers, not sketches): stop the stack and run "
                "`lambdalake speed reset`, which rebuilds the real-time views from Kafka")

    def collapse(self, closed_before: datetime) -> int:
        """Rewrite the windows that ended by ``closed_before`` to one partial row per key
        (sketches stay sketches), in one commit; return how many windows were rewritten."""
        import pyarrow as pa
        from deltalake import write_deltalake

        def collapse_once() -> int:
            table = self._table()
            if table is None:
                return 0
            rows = pa.table(table.to_pyarrow_table(
                filters=[("window_end", "<=", closed_before)]))
            combined = merge_partials(rows, self.view)
            if combined.num_rows == rows.num_rows:
                return 0
            write_deltalake(table, combined, mode="overwrite",
                            predicate=f"window_end <= '{closed_before.isoformat()}'")
            return len(set(combined.column("window_start").to_pylist()))

        return retry_on_conflict(collapse_once)

    def retire(self, before: datetime) -> int:
        """Delete the windows that ended by ``before``; return the rows deleted."""
        def retire_once() -> int:
            table = self._table()
            if table is None:
                return 0
            metrics = table.delete(f"window_end <= '{before.isoformat()}'")
            return int(metrics.get("num_deleted_rows") or 0)

        return retry_on_conflict(retire_once)

    def drop(self) -> str | None:
        """Delete the whole table (files and log); return its path, None if it had none."""
        from pyarrow import fs

        filesystem, path = arrow_filesystem(self.path)
        if filesystem.get_file_info(path).type != fs.FileType.Directory:
            return None
        filesystem.delete_dir(path)
        return path


def check_format(settings: Settings, views: list[ViewDefinition]) -> None:
    """Raise ``RealtimeFormatError`` unless every existing real-time table of ``views``
    holds partial aggregates (appending sketches to an earlier format would fail every
    micro-batch)."""
    for view in views:
        problem = RealtimeTable(settings, view).format_problem()
        if problem:
            raise RealtimeFormatError(problem)


def utc_timestamps(rows: pa.Table) -> pa.Table:
    """Every timestamp column as microseconds in UTC, the type of Delta's ``timestamp``."""
    import pyarrow as pa

    target = pa.timestamp("us", tz="UTC")
    fields = [pa.field(f.name, target, f.nullable) if pa.types.is_timestamp(f.type) else f
              for f in rows.schema]
    return rows.cast(pa.schema(fields))


def current_rows(settings: Settings, view: ViewDefinition) -> pa.Table | None:
    """Each key's value now in ``view``'s real-time table (``RealtimeTable.current_rows``)."""
    return RealtimeTable(settings, view).current_rows()
