"""The batch DAG's timetable: a run triggered by hand gets the last whole interval, counted
from the first day, and the DAG survives Airflow's serialization with it (the plugin)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from airflow.sdk.timezone import coerce_datetime

from lambdalake.orchestration.schedule import BatchIntervals
from tests.support.repo import REPO

NOV_1 = datetime(2026, 11, 1, tzinfo=UTC)
NOV_20 = datetime(2026, 11, 20, tzinfo=UTC)


def inferred(timetable: BatchIntervals, run_after: datetime) -> tuple[datetime, datetime]:
    interval = timetable.infer_manual_data_interval(run_after=coerce_datetime(run_after))
    return interval.start, interval.end


def test_a_run_triggered_now_gets_the_last_whole_interval_before_it() -> None:
    """The form's default logical date is "now": 19:50:12 is the hour [18:00, 19:00), as
    Airflow's cron timetables infer it, not the delta timetable's [18:50:12, 19:50:12)."""
    hourly = BatchIntervals(timedelta(hours=1), NOV_1)
    assert inferred(hourly, NOV_20.replace(hour=19, minute=50, second=12)) == (
        NOV_20.replace(hour=18), NOV_20.replace(hour=19))
    assert inferred(hourly, NOV_20.replace(hour=19)) == (  # a boundary is the interval's end
        NOV_20.replace(hour=18), NOV_20.replace(hour=19))
    daily = BatchIntervals(timedelta(days=1), NOV_1)
    assert inferred(daily, NOV_20.replace(hour=0, minute=5)) == (NOV_20 - timedelta(days=1),
                                                                 NOV_20)


def test_intervals_are_counted_from_the_first_day_not_the_epoch() -> None:
    """Seven hours from 2026-11-20 00:00: 00:00, 07:00, 14:00, 21:00, 04:00 the next day."""
    seven = BatchIntervals(timedelta(hours=7), NOV_20)
    assert inferred(seven, NOV_20.replace(hour=19, minute=50)) == (NOV_20.replace(hour=7),
                                                                   NOV_20.replace(hour=14))
    assert inferred(seven, NOV_20 + timedelta(days=1, hours=5)) == (
        NOV_20.replace(hour=21), NOV_20 + timedelta(days=1, hours=4))
    start, end = inferred(seven, NOV_20 + timedelta(hours=3))  # before the first whole one
    assert (start, end) == (NOV_20 - timedelta(hours=7), NOV_20)
    assert end.tzinfo is not None and end.utcoffset() == timedelta(0)


def test_it_serializes_to_what_it_was_and_refuses_what_makes_no_sense() -> None:
    seven = BatchIntervals(timedelta(hours=7), NOV_20)
    assert BatchIntervals.deserialize(json.loads(json.dumps(seven.serialize()))) == seven
    assert seven != BatchIntervals(timedelta(hours=7), NOV_1)
    assert seven.summary == "every 7 hours from 2026-11-20 00:00 UTC"
    assert BatchIntervals(timedelta(days=1), NOV_1).summary == "every 1 day from 2026-11-01 00:00 UTC"
    with pytest.raises(ValueError, match="positive"):
        BatchIntervals(timedelta(0), NOV_20)
    with pytest.raises(ValueError, match="timezone-aware"):
        BatchIntervals(timedelta(hours=1), NOV_20.replace(tzinfo=None))


PROBE = """
import json, sys
import pendulum
from airflow.dag_processing.dagbag import DagBag
from airflow.serialization.serialized_objects import DagSerialization

bag = DagBag(dag_folder=sys.argv[1], collect_dags=False)
bag.process_file(sys.argv[1] + "/lambdalake_batch_views.py")
assert not bag.import_errors, bag.import_errors
stored = json.loads(json.dumps(DagSerialization.to_dict(bag.dags["lambdalake_batch_views"])))
timetable = DagSerialization.from_dict(stored).timetable
interval = timetable.infer_manual_data_interval(run_after=pendulum.parse(sys.argv[2]))
print(json.dumps([type(timetable).__name__, interval.start.isoformat(),
                  interval.end.isoformat()]))
"""


def test_the_batch_dag_keeps_its_timetable_through_airflows_serialization(
    tmp_path: Path,
) -> None:
    """What the scheduler and the api-server's trigger form see: the DAG as Airflow stored
    it, its timetable found through plugins/ (without the plugin, deserializing fails)."""
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
           "AIRFLOW__CORE__UNIT_TEST_MODE": "True",
           "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
           "LAMBDALAKE_BATCH__INTERVAL": "1 day", "LAMBDALAKE_BATCH__START_DATE": "2026-11-01"}
    command = [sys.executable, "-c", PROBE, str(REPO / "dags"), "2026-11-20T13:54:37+00:00"]
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == [
        "BatchIntervals", "2026-11-19T00:00:00+00:00", "2026-11-20T00:00:00+00:00"]
    without = subprocess.run(command, capture_output=True, text=True, timeout=120,
                             env={**env, "AIRFLOW__CORE__PLUGINS_FOLDER": str(tmp_path)})
    assert without.returncode != 0 and "BatchIntervals" in without.stderr
