"""Spark entry point of the batch layer. Airflow passes exactly these arguments; run by hand,
it does exactly what a DAG run does.

    python spark_jobs/batch_views.py stage --start 2026-11-20T10:00:00Z \\
        --end 2026-11-20T12:00:00Z [--views page_traffic,funnel] [--bronze-version 12] \\
        [--run-id manual-1]
    python spark_jobs/batch_views.py build --views page_traffic [--run-id ...]
    python spark_jobs/batch_views.py switch --views page_traffic --version 2 [--run-id ...]

``stage`` computes each view's slice [start, end) from bronze (as of
``--bronze-version``, the one the run's bronze gate validated; default: the newest) into
the run's staging tables, which no reader sees (the run's ``publish`` promotes them once
its gate passed: ``lambdalake.batch.staging``); ``build`` recomputes a view from all of
bronze into a new version that readers do not see yet; ``switch`` makes a built version
the one readers see, after carrying over and gating the slices published into the old one
meanwhile (exit status 3 if one fails its gate: readers stay on the old version). Each
written slice is printed as a ``result`` JSON line.
"""

import argparse
import sys
import uuid

from lambdalake.batch.recompute import (
    CarriedSliceRejected,
    build_version,
    stage_views,
    switch_to,
)
from lambdalake.batch.written import SliceWritten
from lambdalake.orchestration.spark_jobs import DATA_REJECTED_EXIT
from lambdalake.quality.slices import gate_staged_slice
from lambdalake.settings import get_settings
from lambdalake.spark import task_session
from lambdalake.timeutil import utc_argument
from lambdalake.views.definition import load_views


def report(written: SliceWritten, written_to: str) -> None:
    print(f"batch: {written.describe(written_to)}", flush=True)
    print(written.result_line(), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["stage", "build", "switch"])
    parser.add_argument("--start", type=utc_argument, help="stage: interval start (UTC)")
    parser.add_argument("--end", type=utc_argument,
                        help="stage: interval end, exclusive (UTC)")
    parser.add_argument("--views", help="comma-separated view names (default: all)")
    parser.add_argument("--bronze-version", type=int,
                        help="stage: bronze's version to read (default: the newest)")
    parser.add_argument("--version", type=int, help="switch: the built version to switch to")
    parser.add_argument("--run-id", default=f"manual-{uuid.uuid4().hex[:8]}")
    args = parser.parse_args()
    views = load_views()
    names = args.views.split(",") if args.views else sorted(views)
    unknown = set(names) - set(views)
    if unknown:
        parser.error(f"unknown views {sorted(unknown)}; known: {', '.join(sorted(views))}")
    if args.action == "stage" and (args.start is None or args.end is None):
        parser.error("stage needs --start and --end")
    if args.action == "switch" and (args.version is None or len(names) != 1):
        parser.error("switch needs --version and exactly one view in --views")
    settings = get_settings()
    selected = [views[name] for name in names]
    with task_session(f"batch-views-{args.action}", settings) as spark:
        if args.action == "stage":
            for written in stage_views(spark, settings, selected, args.start, args.end,
                                       args.run_id, args.bronze_version):
                report(written, f"the run's staging table for view version {written.view_version}")
        elif args.action == "build":
            for view in selected:
                built = build_version(spark, settings, view, args.run_id)
                report(built, f"the new view version {built.view_version}")
        else:
            def gate(written: SliceWritten, staged: str) -> bool:
                result = gate_staged_slice(spark, settings, selected[0], staged, written.start,
                                           written.end, written.bronze_version, args.run_id)
                print(result.report(), flush=True)
                if not (result.success or result.data_failed):  # worth the task's retry
                    raise RuntimeError(f"the gate of {written.view}'s carried slice could "
                                       "not validate it (above)")
                return result.success

            try:
                for written in switch_to(spark, settings, selected[0], args.version,
                                         args.run_id, gate):
                    report(written, f"view version {args.version} (carried over, gated)")
            except CarriedSliceRejected as rejected:
                print(f"batch: {rejected}", flush=True)
                sys.exit(DATA_REJECTED_EXIT)
            print(f"batch: {names[0]}: readers now use view version {args.version}", flush=True)
