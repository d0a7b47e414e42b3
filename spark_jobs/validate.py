"""Spark entry point of the quality gates: validate bronze, or batch views, for an interval.

    python spark_jobs/validate.py --layer bronze --start 2026-11-20T10:00:00Z \\
        --end 2026-11-20T11:00:00Z [--bronze-version 12] [--rows auto|required|optional]
    python spark_jobs/validate.py --layer batch [--views page_traffic,funnel] \\
        --start 2026-11-20T10:00:00Z --end 2026-11-20T11:00:00Z [--table-path PATH | \\
        --staged] [--bronze-version 12] [--run-id RUN]

Every requested subject is validated (the views are all validated even if one fails; the
bronze layer is bronze's events of the interval, then the records quarantined among those
that arrived in it, then the history of each reference entity a view joins); each prints
one summary line, then one line per failing expectation with sample values; the step's
results are recorded in the history in one commit (``lambdalake.quality.history``). The
bronze layer is validated as of one version (``--bronze-version``; default: the newest
when the step starts), which it prints first (``gated bronze version N``): the batch run's
compute reads that version. The
exit status is 0 if every gate passed; 3 (``DATA_REJECTED_EXIT``) if the data failed a
critical check and every gate could validate (the batch DAG then fails the task without
retries: the data would fail again); 1 if a gate could not validate (a lost server, an
unreadable slice: worth a retry); 2 for bad arguments.

``--rows``: must a slice have rows? ``auto`` (default): a bronze slice may be empty (a
dead hour; recorded as a warning); a view slice must have rows if bronze has events of the
view's types in the interval. A slice's usual row count comes from the history
(``lambdalake.quality.baseline``). Without ``--views``, every view is validated. Each is
validated in the table readers currently use (``lambdalake.views.catalog``); with
``--staged``, in the slice the run (``--run-id``) staged for the interval
(``lambdalake.batch.staging``: what the batch run's ``gate_views`` validates before its
publish); ``--table-path`` (one view only) validates another table, e.g. a version built
by a full reprocess before the switch.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from typing import TYPE_CHECKING, cast

from lambdalake.settings import Settings, get_settings
from lambdalake.timeutil import utc_argument

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lambdalake.quality.verdict import GateResult




def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layer", choices=["bronze", "batch"], required=True)
    parser.add_argument("--start", type=utc_argument, required=True,
                        help="interval start (UTC)")
    parser.add_argument("--end", type=utc_argument, required=True,
                        help="interval end, exclusive (UTC)")
    parser.add_argument("--views", help="batch: comma-separated view names (default: all)")
    parser.add_argument("--table-path", help="batch, one view: the table to validate")
    parser.add_argument("--staged", action="store_true",
                        help="batch: validate the slices the run (--run-id) staged")
    parser.add_argument("--bronze-version", type=int,
                        help="bronze table version to read (default: latest)")
    parser.add_argument("--rows", choices=["auto", "required", "optional"], default="auto",
                        help="must a slice have rows (see above)")
    parser.add_argument("--run-id", help="recorded with each result")
    return parser


def main(argv: Sequence[str] | None = None, settings: Settings | None = None) -> int:
    args_parser = parser()
    args = args_parser.parse_args(argv)
    if args.end <= args.start:
        args_parser.error(f"empty interval [{args.start}, {args.end})")
    settings = settings or get_settings()

    from lambdalake.lake.bronze import BRONZE_TABLE
    from lambdalake.views.definition import load_views

    views = load_views()
    names = args.views.split(",") if args.views else sorted(views)
    if args.layer == "batch":
        unknown = set(names) - set(views)
        if unknown:
            args_parser.error(f"unknown views {sorted(unknown)}; "
                              f"known: {', '.join(sorted(views))}")
        if args.table_path and len(names) != 1:
            args_parser.error("--table-path needs exactly one view in --views")
        if args.staged and (args.table_path or not args.run_id):
            args_parser.error("--staged needs --run-id and no --table-path")
    elif args.views or args.table_path or args.staged:
        args_parser.error("--views, --table-path and --staged are for --layer batch")
    require_rows = {"auto": None, "required": True, "optional": False}[args.rows]

    from lambdalake.batch.staging import staging_path
    from lambdalake.batch.written import gated_bronze_line
    from lambdalake.lake.delta_rs import table_exists, table_version
    from lambdalake.orchestration.spark_jobs import DATA_REJECTED_EXIT
    from lambdalake.quality.baseline import usual_row_count
    from lambdalake.quality.docs import record_with_pages
    from lambdalake.quality.gate import GATE_SPARK_CONF
    from lambdalake.quality.history import read_row_counts
    from lambdalake.quality.slices import (
        bronze_event_types,
        validate_bronze_slice,
        validate_quarantine_slice,
        validate_reference_history,
        validate_view_slice,
    )
    from lambdalake.spark import SessionOnFirstUse, task_session
    from lambdalake.views.catalog import current_table_path

    history = read_row_counts(settings, args.layer)
    bronze = settings.table_path(BRONZE_TABLE)
    if args.layer == "bronze" and args.bronze_version is None and table_exists(bronze):
        args.bronze_version = table_version(bronze)  # what the run's compute reads, no other
    if args.layer == "bronze" and args.bronze_version is not None:
        print(gated_bronze_line(args.bronze_version), flush=True)

    def usual(layer: str, subject: str) -> tuple[int | None, int | None]:
        return usual_row_count(history, layer, subject, args.start, args.end, settings.quality)

    def gates(spark: SparkSession) -> Iterator[GateResult]:  # each printed as it finishes
        if args.layer == "bronze":
            yield validate_bronze_slice(spark, settings, args.start, args.end,
                                        version=args.bronze_version,
                                        require_rows=bool(require_rows), views=views,
                                        row_count=usual("bronze", BRONZE_TABLE))
            yield validate_quarantine_slice(spark, settings, args.start, args.end)
            for entity in sorted({join.entity for view in views.values()
                                  for join in view.joins}):
                yield validate_reference_history(spark, settings, entity, args.start,
                                                 args.end)
            return
        bronze_types = functools.cache(functools.partial(  # one bronze read for all views
            bronze_event_types, spark, settings, args.start, args.end, args.bronze_version))
        for name in names:
            path = args.table_path or (
                staging_path(settings, name, args.run_id, args.start, args.end) if args.staged
                else current_table_path(settings, name))
            yield validate_view_slice(spark, settings, views[name], path, args.start, args.end,
                                      require_rows=require_rows,
                                      bronze_version=args.bronze_version,
                                      row_count=usual("batch", name), bronze_types=bronze_types)

    results: list[GateResult] = []
    try:
        with ExitStack() as stack:  # a session only if a slice is too large for the step
            spark = cast("SparkSession", SessionOnFirstUse(functools.partial(
                task_session, f"validate-{args.layer}", settings, GATE_SPARK_CONF), stack))
            for result in gates(spark):
                print(result.report(), flush=True)
                results.append(result)
    finally:  # one commit for the step's gates, also those done before an error
        if results:
            record_with_pages(results, settings, run_id=args.run_id)
    failed = [result for result in results if not result.success]
    if not failed:
        return 0
    return DATA_REJECTED_EXIT if all(result.data_failed for result in failed) else 1


if __name__ == "__main__":
    sys.exit(main())
