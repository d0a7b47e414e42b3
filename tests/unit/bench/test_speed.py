"""The speed benchmark's bookkeeping: which batch consumed a record, the lag, and bronze's
freshness beside it."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from bench.harness.common import Result, consumption
from bench.harness.speed_runs import (
    _batch_ends,
    _bronze_freshness,
    lag_after_batches,
    lag_figures,
    lag_growth,
    sustained_rate,
)
from lambdalake.lake.bronze import BRONZE_TABLE
from lambdalake.settings import Settings


def offset_log(checkpoint: Path, batches: dict[int, dict[str, int]]) -> None:
    """Spark's offset log: per batch a file of a version line, metadata and the offsets."""
    (checkpoint / "offsets").mkdir(parents=True)
    for batch, ends in batches.items():
        (checkpoint / "offsets" / str(batch)).write_text(
            f"v1\n{{}}\n{json.dumps({'topic': ends})}")


def test_each_partitions_batch_ends_are_read_in_order(tmp_path: Path) -> None:
    offset_log(tmp_path, {1: {"0": 9, "1": 4}, 0: {"0": 5, "1": 2}})
    (tmp_path / "offsets" / ".1.crc").write_text("")
    assert _batch_ends(tmp_path, "topic") == {0: [(5, 0), (9, 1)], 1: [(2, 0), (4, 1)]}


def test_a_purged_offset_log_is_refused(tmp_path: Path) -> None:
    """Records of purged batches would be charged to the first batch left: minutes late."""
    offset_log(tmp_path, {54: {"0": 900}, 55: {"0": 950}})
    with pytest.raises(RuntimeError, match="starts at batch 54"):
        _batch_ends(tmp_path, "topic")


def finished(checkpoint: Path, batch: int, at: float) -> None:
    """Spark's commit log entry of ``batch``, written at ``at``."""
    (checkpoint / "commits").mkdir(exist_ok=True)
    entry = checkpoint / "commits" / str(batch)
    entry.write_text("v1\n{}")
    os.utime(entry, (at, at))


def test_the_lag_after_each_batch_is_what_was_produced_minus_what_was_consumed(
    tmp_path: Path,
) -> None:
    """Two partitions from offsets 10 and 0; one record created per second from t=100."""
    offset_log(tmp_path, {0: {"0": 12, "1": 1}, 1: {"0": 14, "1": 3}, 2: {"0": 20, "1": 5}})
    finished(tmp_path, 0, 104.5)  # 5 created, 3 consumed
    finished(tmp_path, 1, 107.5)  # 8 created, 7 consumed
    # batch 2 never finished: no lag is known after it
    created = [100.0 + second for second in range(20)]
    assert lag_after_batches(tmp_path, "topic", created, {0: 10, 1: 0}) == [
        (104.5, 2), (107.5, 1)]


def test_batches_outside_the_produced_interval_are_left_out(tmp_path: Path) -> None:
    """Before the first record and after the last the lag says nothing about keeping up."""
    offset_log(tmp_path, {0: {"0": 0}, 1: {"0": 1}, 2: {"0": 3}})
    for batch, at in enumerate((99.0, 100.5, 130.0)):
        finished(tmp_path, batch, at)
    assert lag_after_batches(tmp_path, "topic", [100.0, 101.0, 102.0], {0: 0}) == [(100.5, 0)]


def test_lag_growth_is_the_slope_of_the_lag_after_the_ramp() -> None:
    assert lag_growth([(0.0, 100), (1.0, 100), (2.0, 100)]) == 0
    assert lag_growth([(0.0, 0), (1.0, 250), (2.0, 500), (3.0, 750)]) == pytest.approx(250)
    # the first tenth (the lag rising to its steady level) is not growth
    ramp = [(0.0, 0), (0.5, 5_000), *((float(t), 5_000) for t in range(1, 11))]
    assert lag_growth(ramp) == 0


def test_too_few_batches_give_no_growth_and_no_sustained_verdict() -> None:
    assert lag_growth([]) is None
    assert lag_growth([(0.0, 1)]) is None
    figures = lag_figures([[(0.0, 5), (1.0, 5)], [(0.0, 7)]], offered=1_000)
    assert figures == {"lag_growth_per_second": None, "lag_max": 7, "lag_samples": 1,
                       "sustained": False}


def test_the_slowest_query_decides() -> None:
    steady = [(float(t), 100) for t in range(10)]
    growing = [(float(t), 100 + 20 * t) for t in range(10)]
    figures = lag_figures([steady, growing], offered=1_000)
    assert figures["lag_growth_per_second"] == pytest.approx(20)
    assert figures["sustained"] is False  # 20/s > 1 % of 1,000/s


def consumption_at(rate: int, consumed: float, sustained: bool) -> Result:
    result = consumption("speed", rate, rate, int(consumed * 300), 300)
    result.details.update({"offered_rate": rate, "seconds_offered": 300,
                           "lag_growth_per_second": 0 if sustained else 100, "lag_max": 10,
                           "lag_samples": 50, "sustained": sustained,
                           "ingest": {"lag_max": 200_000, "sustained": False}})
    return result


def test_the_sustained_rate_is_the_highest_rate_kept_up_with_as_every_lower_one() -> None:
    runs = [consumption_at(20_000, 9_500, False), consumption_at(1_000, 1_000, True),
            consumption_at(5_000, 4_990, True), consumption_at(10_000, 9_000, False)]
    result = sustained_rate(runs)
    assert result.value == 5_000
    assert result.name.startswith("speed sustained rate (300 s per rate")
    assert result.details["10,000/s"]["sustained"] is False
    assert result.details["5,000/s"]["ingest"]["lag_max"] == 200_000  # reported, not judged
    assert list(result.details) == ["1,000/s", "5,000/s", "10,000/s", "20,000/s"]
    # a lower rate that failed caps the verdict, whatever a higher one did
    noisy = [consumption_at(1_000, 1_000, True), consumption_at(5_000, 4_000, False),
             consumption_at(10_000, 10_000, True)]
    assert sustained_rate(noisy).value == 1_000
    assert sustained_rate(runs[:1]).value == 0


def test_bronze_freshness_takes_the_records_committed_after_the_warm_up_and_all_of_them(
    settings: Settings,
) -> None:
    path = settings.table_path(BRONZE_TABLE)
    now = datetime.now(UTC)

    def commit(seconds_ago: list[int]) -> None:
        stamps = pa.array([now - timedelta(seconds=s) for s in seconds_ago],
                          pa.timestamp("us", tz="UTC"))
        write_deltalake(path, pa.table({"kafka_timestamp": stamps}), mode="append")

    commit([600])  # the warm-up's: ten minutes old, not the run's
    commit([2, 1])
    commit([3])
    result = _bronze_freshness(settings, 0, 3, 5_000, "")
    assert result.details["n"] == 3
    assert 1 <= result.details["p50"] <= result.value < 60
    with pytest.raises(AssertionError, match="bronze gained 3 records after the warm-up; Kafka acknowledged 4"):
        _bronze_freshness(settings, 0, 4, 5_000, "")
