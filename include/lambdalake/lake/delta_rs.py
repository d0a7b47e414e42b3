"""Small bookkeeping tables of the lake, read and written without Spark (delta-rs).

The view catalog and the batch publication log are a few rows per interval: a JVM for them
would cost more than the work. They are Delta tables beside the data, so they share its
storage, its atomic commits and its time travel. Appends from concurrent writers (two
backfill runs publishing at once) are blind appends, which Delta commits without conflict.
"""

from __future__ import annotations

import functools
import hashlib
import json
import operator
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.fs as pafs
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake.exceptions import DeltaError, DeltaProtocolError

from lambdalake.lake.commits import retry_on_conflict
from lambdalake.stack.object_store import use_process_object_store


def delta_rs_uri(path: str) -> str:
    """delta-rs spells Hadoop's ``s3a://`` as ``s3://``; local paths pass unchanged. A lake
    path on object storage first makes this process reach it (``use_process_object_store``:
    the variables delta-rs and pyarrow read)."""
    if not path.startswith("s3a://"):
        return path
    use_process_object_store()
    return "s3://" + path.removeprefix("s3a://")


def table_exists(path: str) -> bool:
    """Whether a Delta table is at ``path`` (its log, read by delta-rs: no JVM, no session)."""
    return DeltaTable.is_deltatable(delta_rs_uri(path))


def table_version(path: str) -> int:
    """A Delta table's newest version, from its log (delta-rs: no Spark query). Readers
    pin it to read one snapshot; writers report it after their commit."""
    return int(DeltaTable(delta_rs_uri(path), without_files=True).version())


def table_properties(path: str) -> dict[str, str]:
    """A Delta table's properties (``delta.*`` configuration), from its log."""
    return dict(DeltaTable(delta_rs_uri(path), without_files=True).metadata().configuration)


def arrow_filesystem(path: str) -> tuple[pafs.FileSystem, str]:
    """The pyarrow filesystem a lake path lives on, and the path within it (local paths made
    absolute; ``s3a://`` read as ``s3://``)."""
    uri = delta_rs_uri(path)
    filesystem, inner = pafs.FileSystem.from_uri(
        uri if uri.startswith("file:") or "://" in uri else Path(uri).resolve().as_uri())
    return filesystem, str(inner)


UNREADABLE_FILE_BY_FILE = frozenset({"columnMapping", "deletionVectors"})
"""Reader features that make a table's rows more than its data files' rows."""


class FollowedTable:
    """One Delta table, followed across versions: opened once, then brought up to date with
    the commits made since (opening it by path replays up to a hundred commit files)."""

    def __init__(self, path: str) -> None:
        self.uri = delta_rs_uri(path)
        self.table: DeltaTable | None = None
        self._filesystem: pafs.FileSystem | None = None

    def refresh(self) -> int | None:
        """The table's newest version, or None while it does not exist. Brought up to date
        only when a newer commit exists (``moved``: one file lookup): catching up lists the
        log, which costs more the more files it has (about 1 ms a table at 50 commits on a
        local disk; a LIST request on object storage), and the serving API refreshes a dozen
        tables four times a second, mostly finding nothing new (an idle refresh of the
        benchmark's lake: 11–16 ms of CPU before, 0.8 ms after)."""
        if self.table is None:
            if not DeltaTable.is_deltatable(self.uri):
                return None
            self.table = DeltaTable(self.uri)
        elif self.moved():
            self.table.update_incremental()
        return self.table.version()

    def moved(self) -> bool:
        """Whether a commit newer than the one ``refresh`` read exists: one file lookup (2 µs
        on a local disk, a HEAD request on object storage), where ``refresh`` lists the log."""
        if self.table is None:
            return bool(DeltaTable.is_deltatable(self.uri))
        commit = self._storage().get_file_info(f"_delta_log/{self.table.version() + 1:020}.json")
        found: bool = commit.type != pafs.FileType.NotFound
        return found

    def _storage(self) -> pafs.FileSystem:
        """The table's storage, paths relative to its root (opened once): pyarrow's own file
        system (``arrow_filesystem``), where delta-rs's storage handler wrapped as a Python
        one cost 120 us of CPU a lookup against 1.9 us on a local disk, and the serving API
        looks for each real-time table's next commit every 20 ms."""
        if self._filesystem is None:
            filesystem, root = arrow_filesystem(self.uri)
            self._filesystem = pafs.SubTreeFileSystem(root, filesystem)
        return self._filesystem

    def data_files(self) -> dict[str, dict[str, Any]]:
        """The current version's data files (paths from the table's root), each with its
        partition values: what ``read`` takes."""
        assert self.table is not None, "refresh() first"
        actions = pa.table(self.table.get_add_actions(flatten=True))
        partitions = {name: name.removeprefix("partition.") for name in actions.column_names
                      if name.startswith("partition.")}
        files = actions.select(["path", *partitions]).rename_columns(
            ["path", *partitions.values()])
        return {unquote(row.pop("path")): row for row in files.to_pylist()}

    def read(self, files: dict[str, dict[str, Any]]) -> pa.Table:
        """The rows of some of the table's ``data_files``, partition columns included.

        A follower reads only the files it has not seen: a dataset of the whole table
        (``to_pyarrow_dataset``) builds a statistics expression per file, 157 ms for a
        real-time table of 109 files, where a few files' fragments cost milliseconds."""
        assert self.table is not None, "refresh() first"
        unreadable = UNREADABLE_FILE_BY_FILE & set(self.table.protocol().reader_features or ())
        if unreadable:  # file by file, these would read wrong rows: refuse
            raise DeltaProtocolError(f"{self.uri} uses {sorted(unreadable)}: not readable "
                                     "file by file")
        storage = self._storage()
        schema = pa.schema(self.table.schema().to_arrow())
        file_format = pads.ParquetFileFormat()
        fragments = [file_format.make_fragment(
            path, filesystem=storage,
            partition_expression=_partition_condition(values, schema),
        ) for path, values in files.items()]
        return pads.FileSystemDataset(fragments, schema, file_format, storage).to_table()


@dataclass(frozen=True)
class Additions:
    """What a followed table's new version brings a reader that folds rows in."""

    version: int
    start_over: bool        # fold anew: a file read before is gone (compacted, retired), or
                            # the last fold failed partway
    rows: pa.Table | None   # the files not read before (all, when starting over); None: none


class AdditionsReader:
    """A table followed by the data files each version adds, for a reader that folds their
    rows into what it keeps (marks, a value per key) and must start over when files it read
    were removed: a refresh reads what a commit added, not the whole table."""

    def __init__(self, followed: FollowedTable) -> None:
        self.followed = followed
        self.version: int | None = None
        self._read: set[str] = set()
        self._fold_failed = False

    def behind(self) -> bool:
        """Whether a poll would bring something: a newer commit exists (one file lookup), or
        the last poll failed after its table caught up."""
        table = self.followed.table
        return self.followed.moved() or (table is not None and table.version() != self.version)

    def poll(self, fold: Callable[[Additions], None]) -> None:
        """Hand the new version's additions to ``fold`` (nothing while the table is missing
        or unchanged). A fold that raises may have kept part of them: the next poll starts
        over rather than fold them twice."""
        version = self.followed.refresh()
        if version is None or version == self.version:
            return
        files = self.followed.data_files()
        start_over = self._fold_failed or not self._read <= files.keys()
        added = files if start_over else {
            path: values for path, values in files.items() if path not in self._read}
        additions = Additions(version, start_over, self.followed.read(added) if added else None)
        self._fold_failed = True
        fold(additions)
        self._read, self.version, self._fold_failed = set(files), version, False


def _partition_condition(values: dict[str, Any], schema: pa.Schema) -> pc.Expression:
    """A file's partition values as the condition its rows meet (how a fragment knows the
    columns its file does not store)."""
    conditions = [pc.field(name).is_null() if value is None
                  else pc.field(name) == pa.scalar(value, schema.field(name).type)
                  for name, value in values.items()]
    return functools.reduce(operator.and_, conditions, pc.scalar(True))


LOCAL_READ_MAX_BYTES = 512 * 2**20
"""``read_small_slice`` reads in the process no more than this much Parquet (the files its
pruning kept): beyond it, a slice belongs on Spark whatever its row count."""

FilePruning = tuple[tuple[str, str, Any], ...]
"""delta-rs' tuple filters (``DeltaTable.file_uris``): on partition values, exact; on other
columns, a file is skipped only if its min/max statistics rule it out."""


class Slice(Protocol):
    """Some rows of a table, as delta-rs reads them: the files they may be in, and the
    condition on rows that keeps them."""

    @property
    def files(self) -> FilePruning: ...

    @property
    def rows(self) -> pc.Expression: ...


@dataclass(frozen=True)
class Partition:
    """Every row of the partition ``column`` = ``value``."""

    column: str
    value: Any

    @property
    def files(self) -> FilePruning:
        return ((self.column, "=", self.value),)

    @property
    def rows(self) -> pc.Expression:
        return pc.field(self.column) == self.value


@dataclass(frozen=True)
class TimeSlice:
    """The rows whose ``column`` is in [start, end), within the partitions ``partitions``
    keeps (exact filters on partition columns, which the interval implies).

    One interval gives both of delta-rs' conditions: the files to read (partitions, then
    the files' min/max statistics of ``column``) and the rows to keep from them."""

    column: str
    start: datetime
    end: datetime
    partitions: FilePruning = ()

    @property
    def files(self) -> FilePruning:
        return (*self.partitions, (self.column, ">=", self.start), (self.column, "<", self.end))

    @property
    def rows(self) -> pc.Expression:
        return (pc.field(self.column) >= self.start) & (pc.field(self.column) < self.end)


def read_small_slice(
    path: str, piece: Slice, max_rows: int, *, version: int | None = None,
    columns: list[str] | None = None, without: Collection[str] = (),
) -> pa.Table | None:
    """The rows of ``piece`` of the table at ``path`` (at ``version``, default latest), read
    with delta-rs in this process from the files it may be in; None if it has more than
    ``max_rows`` rows, those files hold more than ``LOCAL_READ_MAX_BYTES``, or the table
    uses a feature its files alone do not express (``UNREADABLE_FILE_BY_FILE``).

    For the gates' slices: a few thousand rows of an hour, for which planning a Spark query
    on the table's log costs more than the work. ``columns`` (default all) but ``without``
    keeps columns no check reads, such as a record's raw bytes, out of memory."""
    table = DeltaTable(delta_rs_uri(path), version=version)
    if UNREADABLE_FILE_BY_FILE & set(table.protocol().reader_features or ()):
        return None  # Spark's: a dataset of the files would read wrong rows
    dataset = table.to_pyarrow_dataset(file_pruning_predicate=list(piece.files))
    stored = sum(info.size for info in dataset.filesystem.get_file_info(dataset.files))
    if stored > LOCAL_READ_MAX_BYTES or dataset.count_rows(filter=piece.rows) > max_rows:
        return None
    kept = [c for c in columns or dataset.schema.names if c not in without]
    return dataset.to_table(filter=piece.rows, columns=kept)


def count_slice(path: str, piece: Slice) -> int:
    """How many rows of ``piece`` the table at ``path`` has, counted with delta-rs in this
    process from the files it may be in (reading only the columns its condition names).
    delta-rs refuses a table it cannot read this way (``DeltaProtocolError``)."""
    table = DeltaTable(delta_rs_uri(path))
    return int(table.to_pyarrow_dataset(file_pruning_predicate=list(piece.files))
               .count_rows(filter=piece.rows))


def read_rows(path: str, schema: pa.Schema, where: pc.Expression | None = None
              ) -> list[dict[str, Any]]:
    """The rows of the table at ``path`` (those ``where`` selects, if given) as dicts of
    ``schema``'s columns, the only ones read (none when the table does not exist yet)."""
    uri = delta_rs_uri(path)
    if not DeltaTable.is_deltatable(uri):
        return []
    rows: list[dict[str, Any]] = DeltaTable(uri).to_pyarrow_table(
        columns=schema.names, filters=where).to_pylist()
    return rows


def row_count(path: str) -> int:
    """Rows in the table at ``path`` from its file statistics (0 when it does not exist)."""
    uri = delta_rs_uri(path)
    return DeltaTable(uri).to_pyarrow_dataset().count_rows() if DeltaTable.is_deltatable(uri) else 0


COMPACT_EVERY = 100
"""``append_rows`` compacts a table at every this many versions. A bookkeeping table gains a
small file per append (a publish, a gate step), and a reader of the whole table opens every
file: the publication log after 144 hourly runs, 190–230 ms of CPU a read in 144 files,
31–35 ms compacted (the batch DAG's ``publish`` task grew from 1.0 to 2.5 s over a 168-hour
backfill; it read the log once per view then)."""


def content_key(kind: str, rows: list[dict[str, Any]]) -> str:
    """An idempotency key of a bookkeeping append (``append_rows``' ``once``): its kind and
    a digest of its rows (without the moment they are written: the caller leaves it out)."""
    text = json.dumps(sorted(json.dumps(row, default=str, sort_keys=True) for row in rows))
    return f"{kind}:{hashlib.sha256(text.encode()).hexdigest()[:32]}"


def append_rows(path: str, schema: pa.Schema, rows: list[dict[str, Any]],
                once: str | None = None) -> int:
    """Append ``rows`` in one commit (creating the table on first use); return the table's
    version right after. At every ``COMPACT_EVERY`` versions it compacts the table.

    ``once``: the append's idempotency key, committed with the rows as a Delta app
    transaction; an append whose key the table holds writes nothing. A caller retrying
    after a commit whose answer was lost (an object-store timeout, a task killed after the
    commit) passes the same key and does not append the rows twice.

    Writers that find the table missing at the same moment race to create it; the loser's
    create may land as a metadata commit right after the winner's, which fails appends that
    read the table before it ("Metadata changed since last commit"). A failed commit wrote
    nothing, so the append is simply tried again.
    """
    uri = delta_rs_uri(path)

    def create_and_append() -> int:
        if not DeltaTable.is_deltatable(uri):
            DeltaTable.create(uri, schema=schema, mode="ignore")
        if once is not None:
            table = DeltaTable(uri, without_files=True)  # the log's app transactions only
            if table.transaction_version(once) is not None:
                return table.version()
        # merge: a table an earlier release created gains the columns added since
        write_deltalake(uri, pa.Table.from_pylist(rows, schema=schema), mode="append",
                        schema_mode="merge",
                        commit_properties=None if once is None else CommitProperties(
                            app_transactions=[Transaction(once, 0)]))
        return table_version(path)

    version = retry_on_conflict(create_and_append, pause_seconds=0.05)
    if version % COMPACT_EVERY == 0:
        compact(path)
    return version


def compact(path: str) -> None:
    """Rewrite the table's small files as few large ones (readers see the same rows).

    Opportunistic: if it fails (say, it lost to a concurrent writer), the files stay as
    they are until the next time; nothing is lost either way.
    """
    try:
        DeltaTable(delta_rs_uri(path)).optimize.compact()
    except DeltaError:
        pass
