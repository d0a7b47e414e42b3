"""Write-audit-publish: a run's view slices are written where no reader looks, gated there,
and copied into the table readers use only when the run publishes them.

``compute`` writes each view's slice into a *staging table* of its own, named after the
view, the run and the interval (``staging_path``): nothing reads it but the run's gate.
``gate_views`` validates the staged rows. ``publish`` then *promotes* each staged slice:
one Delta commit replaces the interval's rows in the view's current version
(``promote``), then the publication is logged and the staging tables are removed
(``discard``). So a slice that fails its gate was never visible, the rows readers were
served stay as they were, a later run of another interval cannot publish it (each run
stages its own), and its late rows stay waiting (the late-row detector reads the table
readers use), so the restatement policy retries them.

Why a staging table per run and not serving pinned to the Delta version each publish
records: runs of different intervals write one view table at the same time (a backfill),
so a version after one run's write holds another's unpublished slice too; a table per run
keeps every run's rows apart until its own publish, and readers keep following one table
per view. The cost is a second write of the slice (the copy at publish: aggregates, a few
rows per window) and a staging table per view and run, removed once published.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import operator
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from lambdalake.lake.commits import retry_on_conflict
from lambdalake.lake.delta_rs import arrow_filesystem, delta_rs_uri, table_exists
from lambdalake.settings import Settings
from lambdalake.timeutil import as_utc
from lambdalake.views.catalog import current_version, physical_table

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.compute as pc

log = logging.getLogger(__name__)

STAGING_DIR = "_staging"
"""Under the lake root: one staging table per view, run and interval."""


def staging_path(settings: Settings, view_name: str, run_id: str, start: datetime,
                 end: datetime) -> str:
    """Where ``run_id`` stages ``view_name``'s slice [start, end). Run ids hold characters
    object stores and paths treat specially (``:``, ``+``), so the run and the interval
    are named by a digest."""
    key = f"{run_id}\x1f{start.astimezone(UTC).isoformat()}\x1f{end.astimezone(UTC).isoformat()}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:24]
    return settings.table_path(f"{STAGING_DIR}/{view_name}/{digest}")


def interval_predicate(start: datetime, end: datetime,
                       keep: Iterable[tuple[datetime, datetime | None]] = ()) -> str:
    """A view table's rows of [start, end), in SQL both delta-rs and Spark read, but for
    the windows ``keep`` names: a window start, with None, or a range [from, to)."""

    def at_or_after(moment: datetime) -> str:
        return f"window_start >= '{moment.astimezone(UTC).isoformat()}'"

    def before(moment: datetime) -> str:
        return f"window_start < '{moment.astimezone(UTC).isoformat()}'"

    kept = [f"window_start = '{low.astimezone(UTC).isoformat()}'" if high is None
            else f"({at_or_after(low)} AND {before(high)})" for low, high in keep]
    return " AND ".join([at_or_after(start), before(end), *(f"NOT {k}" for k in kept)])


def replace_interval(rows: pa.Table | pa.RecordBatchReader, path: str, start: datetime,
                     end: datetime, keep: Iterable[tuple[datetime, datetime | None]] = ()
                     ) -> None:
    """One Delta commit that swaps the view table's rows in [start, end) for ``rows``, but
    for the windows ``keep`` names (``interval_predicate``), whose rows stay."""
    from deltalake import DeltaTable, write_deltalake

    uri = delta_rs_uri(path)
    # created first, empty: two runs whose intervals overlap (a triggered run over days and
    # the scheduled hour in it) may write a new table at once, and delta-rs checks a
    # replace against a concurrent one only on a table both read; a first write that
    # created the table kept both runs' rows of the shared hours. A lost race to create
    # it fails this commit, which ``retry_on_conflict`` tries again.
    if not DeltaTable.is_deltatable(uri):
        DeltaTable.create(uri, schema=rows.schema, mode="ignore", partition_by=["window_start"])
    write_deltalake(uri, rows, mode="overwrite", partition_by=["window_start"],
                    predicate=interval_predicate(start, end, keep))


def newer_windows(settings: Settings, view_name: str, path: str, start: datetime,
                  end: datetime, bronze_version: int) -> list[tuple[datetime, datetime | None]]:
    """The windows of [start, end) that the view table at ``path`` holds from a bronze
    version newer than ``bronze_version`` (each start, with None), and the ranges of it a
    publication from a newer version covers (windows it found no rows in): what a slice
    computed from ``bronze_version`` must not replace."""
    import pyarrow.compute as pc
    from deltalake import DeltaTable

    from lambdalake.batch.publication import read_publications

    overlapping = ((pc.field("view") == view_name) & (pc.field("interval_start") < end)
                   & (pc.field("interval_end") > start)
                   & (pc.field("bronze_version") > bronze_version))
    newer: list[tuple[datetime, datetime | None]] = [
        (max(row["interval_start"], start), min(row["interval_end"], end))
        for row in read_publications(settings, where=overlapping)]
    uri = delta_rs_uri(path)
    if DeltaTable.is_deltatable(uri):
        window, lineage = pc.field("window_start"), pc.field("bronze_version")
        rows = DeltaTable(uri).to_pyarrow_dataset().to_table(
            columns=["window_start", "bronze_version"],
            filter=(window >= start) & (window < end) & (lineage > bronze_version))
        newer += [(as_utc(moment, naive_is_utc=True), None)
                  for moment in sorted(set(rows.column("window_start").to_pylist()))]
    return newer


def promote(settings: Settings, view_name: str, start: datetime, end: datetime,
            staged: str, bronze_version: int, into_version: int | None = None) -> int:
    """Copy the staged slice at ``staged`` (computed from ``bronze_version``) into the view's
    table, replacing [start, end) in one commit; return the view version it went into. By
    default that is the version readers use, written again into the new one if a full
    reprocess switched readers meanwhile (so no switch loses it); ``into_version`` names a
    version readers do not use yet (a full reprocess carrying slices over before its
    switch). Promoting a slice again (a retried publish) writes the same rows; windows the
    table holds from a newer bronze version stay as they are (``newer_windows``: a publish
    retried after a later run of the interval published must not bring older rows back)."""
    from deltalake import DeltaTable

    staged_table = DeltaTable(delta_rs_uri(staged))

    def copy_into(version: int) -> None:
        path = settings.table_path(physical_table(view_name, version))

        def write() -> None:
            keep = newer_windows(settings, view_name, path, start, end, bronze_version)
            if keep:
                log.warning("%s: %d windows or ranges of [%s, %s) were published from a "
                            "bronze version newer than %d, and keep those rows",
                            view_name, len(keep), start, end, bronze_version)
            rows = staged_table.to_pyarrow_dataset()
            chosen = rows.scanner(filter=_outside(keep)) if keep else rows.scanner()
            replace_interval(chosen.to_reader(), path, start, end, keep)

        retry_on_conflict(write)

    if into_version is not None:
        copy_into(into_version)
        return into_version
    while True:
        version = current_version(settings, view_name)
        copy_into(version)
        if current_version(settings, view_name) == version:
            return version


def _outside(keep: list[tuple[datetime, datetime | None]]) -> pc.Expression:
    """A dataset filter: rows in none of the windows ``keep`` names."""
    import pyarrow.compute as pc

    window = pc.field("window_start")
    inside = [(window == low) if high is None else ((window >= low) & (window < high))
              for low, high in keep]
    return ~functools.reduce(operator.or_, inside)


def discard(path: str) -> None:
    """Remove a staging table (nothing reads it once its slice is published). Its log goes
    first, so a removal cut short leaves no table, only files a later removal takes."""
    filesystem, inner = arrow_filesystem(path)
    for directory in (f"{inner}/_delta_log", inner):
        try:
            filesystem.delete_dir(directory)
        except FileNotFoundError:
            pass


def discard_stale(settings: Settings, now: datetime | None = None) -> list[str]:
    """Remove the staging tables last written more than ``batch.failed_staging_keep_hours``
    ago: a failed run's (a published run removes its own), kept that long for inspection;
    the paths removed."""
    import pyarrow.fs as pafs

    cutoff = (now or datetime.now(UTC)) - timedelta(hours=settings.batch.failed_staging_keep_hours)
    filesystem, root = arrow_filesystem(settings.table_path(STAGING_DIR))

    def subdirectories(path: str) -> list[str]:
        return [info.path for info in filesystem.get_file_info(
            pafs.FileSelector(path, allow_not_found=True)) if info.type == pafs.FileType.Directory]

    removed = []
    for table in (t for view in subdirectories(root) for t in subdirectories(view)):
        # any file's time, not only the log's: a write on Spark adds its data files first,
        # so a table being staged right now may have no commit yet
        written = [info.mtime for info in filesystem.get_file_info(
            pafs.FileSelector(table, allow_not_found=True, recursive=True)) if info.mtime]
        if not written or max(written) < cutoff:
            discard(f"{settings.table_path(STAGING_DIR)}/{table[len(root):].strip('/')}")
            removed.append(table)
    return removed


def promote_run(settings: Settings, run_id: str, start: datetime, end: datetime,
                bronze_versions: dict[str, int]) -> dict[str, int]:
    """Promote every view's slice that ``run_id`` staged for [start, end) (from the bronze
    version ``bronze_versions`` names per view); return the view version each went into. A
    slice whose staging table is gone was promoted and published by an earlier try of the
    same publish (its staging tables are removed last)."""
    versions = {}
    for view, bronze_version in bronze_versions.items():
        path = staging_path(settings, view, run_id, start, end)
        versions[view] = (promote(settings, view, start, end, path, bronze_version)
                          if table_exists(path)
                          else _published_version(settings, view, run_id, start, end))
    return versions


def _published_version(settings: Settings, view: str, run_id: str, start: datetime,
                       end: datetime) -> int:
    from lambdalake.batch.publication import read_publications

    logged = [row["view_version"] for row in read_publications(settings)
              if (row["view"], row["run_id"], row["interval_start"], row["interval_end"])
              == (view, run_id, start, end)]
    if not logged:
        raise FileNotFoundError(
            f"run {run_id} has no staged slice of {view} for [{start}, {end}) and never "
            "published one: clear its compute task, so the run stages the slice again")
    return int(logged[-1])


def discard_run(settings: Settings, run_id: str, start: datetime, end: datetime,
                views: list[str]) -> None:
    """Remove the staging tables of a published run."""
    for view in views:
        discard(staging_path(settings, view, run_id, start, end))
