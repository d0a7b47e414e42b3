"""The row-count anomaly's bounds, learnt from the gate history; the quarantine suite and
both warnings on real GX validations (pandas, no Spark)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pandas as pd

from lambdalake.lake.bronze import QUARANTINE_COLUMNS
from lambdalake.quality.baseline import NO_BOUNDS, usual_row_count
from lambdalake.quality.gate import pandas_batch_definition, validate_in_two_passes
from lambdalake.quality.history import read_results, read_row_counts, record
from lambdalake.quality.suites.common import interval_parameters
from lambdalake.quality.suites.quarantine import quarantine_max_rows, quarantine_suite
from lambdalake.quality.verdict import GateResult
from lambdalake.settings import QualitySettings, Settings
from lambdalake.streaming.classification import QUARANTINE_REASONS

T0 = datetime(2026, 11, 20, tzinfo=UTC)
HOUR = timedelta(hours=1)
POLICY = QualitySettings(row_count_history=4, row_count_min_history=3, row_count_factor=2.0)


def recorded(hour: int, rows: int, *, hours: int = 1, subject: str = "page_traffic",
             layer: str = "batch", evaluated: int = 20) -> dict[str, Any]:
    start = T0 + hour * HOUR
    return {"layer": layer, "subject": subject, "start": start.isoformat(),
            "end": (start + hours * HOUR).isoformat(), "rows": rows, "evaluated": evaluated}


def bounds(history: list[dict[str, Any]], hour: int = 10, hours: int = 1
           ) -> tuple[int | None, int | None]:
    """The bounds of a slice, with ``history`` recorded in list order (oldest first)."""
    history = [{**r, "recorded_at": (T0 + timedelta(days=1, minutes=i)).isoformat()}
               for i, r in enumerate(history)]
    start = T0 + hour * HOUR
    return usual_row_count(history, "batch", "page_traffic", start, start + hours * HOUR, POLICY)


def test_no_bounds_until_enough_intervals_are_known() -> None:
    assert bounds([]) == NO_BOUNDS
    assert bounds([recorded(0, 100), recorded(1, 100)]) == NO_BOUNDS
    # other subjects, other layers and gates that evaluated nothing do not count
    assert bounds([recorded(0, 100), recorded(1, 100), recorded(2, 100, subject="funnel"),
                   recorded(3, 100, layer="realtime"), recorded(4, 0, evaluated=0)]) == NO_BOUNDS


def test_bounds_are_the_recent_median_per_hour_scaled_within_the_factor() -> None:
    history = [recorded(0, 90), recorded(1, 100), recorded(2, 400, hours=4), recorded(3, 5000)]
    assert bounds(history) == (50, 200)  # median of 90, 100, 100, 5000 per hour is 100
    assert bounds(history, hours=24) == (1200, 4800)  # a triggered run over a day
    # only the newest row_count_history intervals: the two oldest (90, 100) drop out
    newer = [*history, recorded(7, 5000), recorded(8, 5000)]
    assert bounds(newer) == (2500, 10000)


def test_a_rerun_is_not_compared_with_itself_and_an_interval_counts_once() -> None:
    history = [recorded(0, 100), recorded(1, 100), recorded(10, 100000)]
    assert bounds(history) == NO_BOUNDS  # hour 10 is the slice being validated
    assert bounds([recorded(0, 100), recorded(1, 100), recorded(1, 100)]) == NO_BOUNDS
    rerun = [recorded(0, 10), recorded(1, 1000), recorded(2, 10), recorded(2, 1000)]
    assert bounds(rerun) == (500, 2000)  # hour 2 counts once, with its newest result



def test_the_recorded_history_gives_the_same_bounds_from_its_flat_columns(
        settings: Settings) -> None:
    hours = [(0, 90, "batch", "page_traffic"), (1, 130, "batch", "page_traffic"),
             (2, 400, "batch", "page_traffic"), (2, 120, "batch", "page_traffic"),  # a re-run
             (3, 5000, "batch", "funnel"), (4, 7, "bronze", "bronze_events")]
    for hour, rows, layer, subject in hours:
        start = T0 + hour * HOUR
        record(GateResult(layer, subject, start, start + HOUR, True, [], [], 20, rows, 0.5),
               settings)
    entries = read_results(settings)
    counts = read_row_counts(settings, "batch")
    kept = ("layer", "subject", "start", "end", "rows", "evaluated", "recorded_at")
    assert counts == [{key: entry[key] for key in kept}
                      for entry in entries if entry["layer"] == "batch"]
    policy = QualitySettings(row_count_history=4, row_count_min_history=2, row_count_factor=2.0)
    start = T0 + 10 * HOUR
    assert usual_row_count(counts, "batch", "page_traffic", start, start + HOUR, policy) \
        == usual_row_count(entries, "batch", "page_traffic", start, start + HOUR, policy) \
        == (60, 240)  # the median of 90, 130 and hour 2's newest, 120, per hour

def test_a_runs_verdict_recorded_again_is_held_once_and_other_records_each_time(
        settings: Settings) -> None:
    """A task retried after its commit landed (the answer lost) records the same verdicts
    of the same run again, later and with another duration: the history keeps one."""
    def verdict(rows: int, seconds: float) -> GateResult:
        return GateResult("batch", "page_traffic", T0, T0 + HOUR, True, [], [], 20, rows,
                          seconds)

    record(verdict(100, 0.5), settings, run_id="run-1")
    record(verdict(100, 0.7), settings, run_id="run-1")  # the retry
    record(verdict(120, 0.5), settings, run_id="run-1")  # other data: another verdict
    record(verdict(100, 0.5), settings, run_id="run-2")
    record(verdict(100, 0.5), settings)  # no run to tell retries by: each one kept
    record(verdict(100, 0.5), settings)
    assert [(r["rows"], r.get("run_id")) for r in read_results(settings)] == [
        (100, "run-1"), (120, "run-1"), (100, "run-2"), (100, None), (100, None)]


def quarantined(count: int, *, reason: str = "invalid_json", hour: int = 10) -> pd.DataFrame:
    start = T0 + hour * HOUR
    rows = [{"topic": "events", "partition": i % 3, "offset": i,
             "kafka_timestamp": start + timedelta(seconds=i), "key": None, "raw_value": b"{",
             "quarantine_reason": reason, "quarantine_detail": None,
             "ingested_at": start + HOUR, "ingest_date": start.date()} for i in range(count)]
    return pd.DataFrame(rows, columns=QUARANTINE_COLUMNS)


def validate_quarantine(frame: pd.DataFrame, arrived: int) -> tuple[list[str], list[str]]:
    start = T0 + 10 * HOUR
    parameters = interval_parameters(start, start + HOUR, quarantine_max_rows=quarantine_max_rows(
        arrived, QualitySettings().quarantine_max_rate))
    critical, warnings, evaluated, _ = validate_in_two_passes(
        pandas_batch_definition(), frame, quarantine_suite(), parameters)
    assert evaluated == len(quarantine_suite().expectations)
    return [o.check for o in critical], [o.check for o in warnings]


def test_the_quarantine_rate_warns_and_broken_quarantine_rows_block() -> None:
    assert QualitySettings().quarantine_max_rate == 0.05
    assert quarantine_max_rows(1000, 0.05) == 50 and quarantine_max_rows(19, 0.05) == 0
    assert validate_quarantine(quarantined(50), arrived=1000) == ([], [])
    assert validate_quarantine(quarantined(0), arrived=0) == ([], [])
    assert validate_quarantine(quarantined(51), arrived=1000) == ([], ["quarantine_rate"])
    unknown = quarantined(5, reason="felt_wrong")
    twice = pd.concat([quarantined(5), quarantined(1)], ignore_index=True)
    late = quarantined(5, hour=11)
    assert validate_quarantine(unknown, 1000) == (["in_set:quarantine_reason"], [])
    assert validate_quarantine(twice, 1000) == (["unique:topic,partition,offset"], [])
    assert validate_quarantine(late, 1000) == (["in_interval:kafka_timestamp"], [])
    assert set(QUARANTINE_REASONS) >= {"invalid_json", "missing_required", "oversized"}
