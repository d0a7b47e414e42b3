"""A gate's verdict: which failures are about the data, and which are the gate's own."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from lambdalake.quality.verdict import (
    CRITICAL,
    ExpectationOutcome,
    GateResult,
    did_not_run,
    json_ready,
)

START = datetime(2026, 11, 20, 10, tzinfo=UTC)
END = START + timedelta(hours=1)
NEGATIVE_VIEWS = ExpectationOutcome("range:views", "expect_column_values_to_be_between",
                                    "views", CRITICAL, "a count is never negative",
                                    unexpected_count=3)
RAISED = ExpectationOutcome("not_null:run_id", "expect_column_values_to_not_be_null", "run_id",
                            CRITICAL, error="no column run_id")


def gate(*critical: ExpectationOutcome) -> GateResult:
    return GateResult("batch", "page_traffic", START, END, success=not critical,
                      critical_failures=list(critical), warnings=[], evaluated=5, rows=10)


def test_only_a_gate_that_evaluated_its_suite_rejects_the_data() -> None:
    assert gate(NEGATIVE_VIEWS).data_failed
    assert not gate().data_failed  # passed
    assert not gate(NEGATIVE_VIEWS, RAISED).data_failed  # one check could not be evaluated
    lost = did_not_run("batch", "page_traffic", START, END,
                       RuntimeError("the Spark Connect server is gone"), time.monotonic())
    assert not lost.success and not lost.data_failed


def test_a_sample_timestamp_reads_the_same_from_either_engine() -> None:
    """Spark (a session in UTC) returns naive UTC timestamps, the local engine aware ones."""
    import pandas as pd

    spark_value = datetime(2026, 11, 20, 11, 5)
    pandas_value = pd.Timestamp("2026-11-20 12:05", tz="Europe/Berlin")
    assert json_ready([spark_value, pandas_value, spark_value.replace(tzinfo=UTC)]) == [
        "2026-11-20T11:05:00"] * 3
