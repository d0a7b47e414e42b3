"""What a serving refresh costs as the publication log grows: a diagnostic (no goal, no
baseline) for the serving API's cost per publish, which must not grow with history.

    python -m bench.diagnostics.serving_refresh [--hours 8760]

It writes, with delta-rs in a temporary lake, ``--hours`` hourly publications of every view
(a year by default: 43,800 rows), takes the serving API's first snapshots, then prints the
CPU of a refresh that finds nothing new (the API's usual one, four a second per worker) and
of a refresh after one more publish (median of several).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from lambdalake.batch.publication import Publication, publish
from lambdalake.serving.snapshot import SnapshotStore
from lambdalake.settings import Settings
from lambdalake.views.definition import load_views

FIRST_HOUR = datetime(2025, 1, 1, tzinfo=UTC)


def publications(views: list[str], hours: range) -> list[Publication]:
    return [Publication(view, FIRST_HOUR + timedelta(hours=h),
                        FIRST_HOUR + timedelta(hours=h + 1), 1, 1, "bench")
            for h in hours for view in views]


def cpu_milliseconds(action: Callable[[], object]) -> float:
    started = time.process_time()
    action()
    return (time.process_time() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hours", type=int, default=8760, help="hourly publications per view")
    hours = parser.parse_args().hours
    views = load_views()
    with tempfile.TemporaryDirectory() as state_dir:
        lake = Settings(state_dir=Path(state_dir), batch={"start_date": FIRST_HOUR.date()})
        publish(lake, publications(list(views), range(hours)))
        store = SnapshotStore(lake, views)
        store.refresh()
        idle = [cpu_milliseconds(store.refresh) for _ in range(20)]
        after_publish = []
        for h in range(hours, hours + 5):
            publish(lake, publications(list(views), range(h, h + 1)))
            after_publish.append(cpu_milliseconds(store.refresh))
        mark = store.get(next(iter(views))).high_water_mark
    assert mark == FIRST_HOUR + timedelta(hours=hours + 5), mark
    print(f"{hours} hourly publications of {len(views)} views ({hours * len(views)} rows): "
          f"a refresh that finds nothing new {statistics.median(idle):.2f} ms of CPU, "
          f"a refresh after a publish {statistics.median(after_publish):.1f} ms "
          "(medians of 20 and 5)")


if __name__ == "__main__":
    main()
