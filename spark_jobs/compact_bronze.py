"""Spark entry point: compact bronze's closed event-date partitions (small-file control).

    python spark_jobs/compact_bronze.py --before 2026-11-21
"""

import argparse
from datetime import date

from lambdalake.lake.bronze import FILE_WRITE_CONF, compact_closed_partitions
from lambdalake.settings import get_settings
from lambdalake.spark import task_session

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--before", type=date.fromisoformat, required=True,
                        help="compact event dates before this day (YYYY-MM-DD)")
    args = parser.parse_args()
    settings = get_settings()
    with task_session("compact-bronze", settings, FILE_WRITE_CONF) as spark:
        removed = compact_closed_partitions(spark, settings, args.before)
    print(f"compact-bronze: {removed} small files compacted in partitions before {args.before}")
