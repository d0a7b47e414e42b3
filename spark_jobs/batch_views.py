"""Spark entry point of the batch layer. Airflow passes exactly these arguments; run by hand,
it does exactly what a DAG run does.

    python spark_jobs/batch_views.py recompute --start 2026-11-20T10:00:00Z \\
        --end 2026-11-20T12:00:00Z [--views page_traffic,funnel] [--bronze-version 12] \\
        [--run-id manual-1]
    python spark_jobs/batch_views.py build --views page_traffic [--run-id ...]
    python spark_jobs/batch_views.py switch --views page_traffic --version 2 [--run-id ...]

``recompute`` replaces each view's slice [start, end) from bronze (as of
``--bronze-version``, the one the run's bronze gate validated; default: the newest);
``build`` recomputes a
view from all of bronze into a new version that readers do not see yet; ``switch`` makes a
built version the one readers see. Each written slice is printed as a ``result`` JSON line.
"""

import argparse
import uuid

from lambdalake.batch.recompute import build_version, recompute_views, switch_to
from lambdalake.batch.written import SliceWritten
from lambdalake.settings import get_settings
from lambdalake.spark import task_session
from lambdalake.timeutil import utc_argument
from lambdalake.views.definition import load_views


def report(written: SliceWritten) -> None:
    print(f"batch: {written.view} v{written.view_version} [{written.start:%Y-%m-%d %H:%M}, "
          f"{written.end:%Y-%m-%d %H:%M}) {written.rows} rows from bronze "
          f"v{written.bronze_version} -> table v{written.table_version}", flush=True)
    print(written.result_line(), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["recompute", "build", "switch"])
    parser.add_argument("--start", type=utc_argument, help="recompute: interval start (UTC)")
    parser.add_argument("--end", type=utc_argument,
                        help="recompute: interval end, exclusive (UTC)")
    parser.add_argument("--views", help="comma-separated view names (default: all)")
    parser.add_argument("--bronze-version", type=int,
                        help="recompute: bronze's version to read (default: the newest)")
    parser.add_argument("--version", type=int, help="switch: the built version to switch to")
    parser.add_argument("--run-id", default=f"manual-{uuid.uuid4().hex[:8]}")
    args = parser.parse_args()
    views = load_views()
    names = args.views.split(",") if args.views else sorted(views)
    unknown = set(names) - set(views)
    if unknown:
        parser.error(f"unknown views {sorted(unknown)}; known: {', '.join(sorted(views))}")
    if args.action == "recompute" and (args.start is None or args.end is None):
        parser.error("recompute needs --start and --end")
    if args.action == "switch" and (args.version is None or len(names) != 1):
        parser.error("switch needs --version and exactly one view in --views")
    settings = get_settings()
    selected = [views[name] for name in names]
    with task_session(f"batch-views-{args.action}", settings) as spark:
        if args.action == "recompute":
            for written in recompute_views(spark, settings, selected, args.start, args.end,
                                           args.run_id, args.bronze_version):
                report(written)
        elif args.action == "build":
            for view in selected:
                report(build_version(spark, settings, view, args.run_id))
        else:
            for written in switch_to(spark, settings, selected[0], args.version, args.run_id):
                report(written)
            print(f"batch: {names[0]} readers now use v{args.version}", flush=True)
