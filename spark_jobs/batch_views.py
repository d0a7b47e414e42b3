"""Spark entry point of the batch layer: recompute view slices for an event-time interval.

    python spark_jobs/batch_views.py --start 2026-11-20T10:00:00Z --end 2026-11-20T12:00:00Z \\
        [--views page_traffic,funnel] [--run-id manual-1]

Every grain-aligned slice of [start, end) of each view is replaced from bronze. Airflow
passes exactly these arguments; run by hand, it does exactly what a DAG run does.
"""

import argparse
import uuid
from datetime import UTC, datetime

from lambdalake.settings import get_settings
from lambdalake.spark import get_spark
from lambdalake.views.batch import recompute_interval
from lambdalake.views.definition import load_views


def utc(text: str) -> datetime:
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{text!r}: give a time zone, e.g. 2026-11-20T10:00:00Z")
    return moment.astimezone(UTC)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--start", type=utc, required=True)
    parser.add_argument("--end", type=utc, required=True)
    parser.add_argument("--views", help="comma-separated view names (default: all)")
    parser.add_argument("--run-id", default=f"manual-{uuid.uuid4().hex[:8]}")
    args = parser.parse_args()
    views = load_views()
    names = args.views.split(",") if args.views else sorted(views)
    unknown = set(names) - set(views)
    if unknown:
        parser.error(f"unknown views {sorted(unknown)}; known: {', '.join(sorted(views))}")
    settings = get_settings()
    spark = get_spark("batch-views", settings)
    for name in names:
        for written in recompute_interval(spark, settings, views[name], args.start, args.end,
                                          args.run_id):
            print(f"batch: {written.view} [{written.start:%Y-%m-%d %H:%M}, "
                  f"{written.end:%H:%M}) {written.rows} rows from bronze v{written.bronze_version}"
                  f" -> table v{written.table_version}", flush=True)
