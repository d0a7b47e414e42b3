"""A failed streaming query's cause, in one line an operator reads first; and which Kafka
errors the lag probe waits out (a cluster settling) instead of failing on."""

from __future__ import annotations

from typing import Any

from lambdalake.streaming.progress import failures, root_cause
from lambdalake.streaming.runner import outdated, restart_outdated
from lambdalake.streaming.service import is_transient

JVM_FAILURE = """[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: Job aborted.
org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 3.0 failed
\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(DAGScheduler.scala:2856)
Caused by: org.apache.spark.SparkException: [TASK_WRITE_FAILED] Task failed while writing rows
\tat org.apache.spark.sql.errors.QueryExecutionErrors$.taskFailedWhileWritingRowsError(x.scala:1)
Caused by: java.io.IOException: No space left on device
\tat java.base/java.io.FileOutputStream.writeBytes(Native Method)
\t... 21 more
"""

PYTHON_FAILURE = """An exception was raised by the Python Proxy. Return Message: Traceback (most recent call last):
  File "/venv/pyspark/sql/utils.py", line 120, in call
    raise e
  File "/work/include/lambdalake/speed/realtime.py", line 60, in append_updates
    write_deltalake(path, rows)
OSError: Generic LocalFileSystem error: Unable to write: No space left on device (os error 28)
"""


def test_the_innermost_jvm_cause_is_the_one_shown() -> None:
    assert root_cause(JVM_FAILURE) == "java.io.IOException: No space left on device"


def test_the_last_exception_of_a_python_traceback_is_the_one_shown() -> None:
    assert root_cause(PYTHON_FAILURE) == ("OSError: Generic LocalFileSystem error: Unable to "
                                          "write: No space left on device (os error 28)")


def test_a_failure_without_an_exception_line_shows_its_first_line() -> None:
    assert root_cause("\n  the query was killed\nby someone\n") == "the query was killed"


def test_failures_name_each_failed_query_of_one_or_several() -> None:
    single = {"query": "ingest", "active": False, "error": "java.io.IOException: disk"}
    assert failures(single) == ["ingest: java.io.IOException: disk"]
    several = {"views": {"a": {"query": "speed_a", "error": None},
                         "b": {"query": "speed_b", "error": "OSError: gone"}}}
    assert failures(several) == ["speed_b: OSError: gone"]
    assert failures({}) == []


def test_a_partition_without_a_leader_is_waited_out_but_a_refusal_is_not() -> None:
    from confluent_kafka import KafkaError

    assert is_transient(KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION))
    assert is_transient(KafkaError(KafkaError._TRANSPORT))
    assert not is_transient(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED))
    assert not is_transient(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))


def test_a_micro_batch_that_found_its_plan_outdated_is_told_from_other_failures() -> None:
    """The runner starts such a query again in the same process; any other failure stops it."""
    planned_anew = PYTHON_FAILURE.replace(
        "OSError: Generic LocalFileSystem error: Unable to write: No space left on device "
        "(os error 28)",
        "lambdalake.streaming.runner.PlanOutdated: the events topic's registered schemas "
        "changed (ids [1] -> [1, 2], registry answered: True -> True)")
    assert outdated(planned_anew) == ("the events topic's registered schemas changed (ids "
                                      "[1] -> [1, 2], registry answered: True -> True)")
    assert outdated(PYTHON_FAILURE) is None
    assert outdated(JVM_FAILURE) is None
    assert root_cause(planned_anew) == (
        "lambdalake.streaming.runner.PlanOutdated: the events topic's registered schemas "
        "changed (ids [1] -> [1, 2], registry answered: True -> True)")


class Query:
    """What the runner asks of a streaming query: whether it runs, and why it stopped. This
    one runs until it has been asked ``runs_for`` times, then has stopped with ``error``."""

    def __init__(self, name: str, error: str | None, runs_for: int = 0) -> None:
        self.name, self.error, self.asked = name, error, 0
        self.runs_for = runs_for

    @property
    def isActive(self) -> bool:  # PySpark's name
        self.asked += 1
        return self.asked <= self.runs_for

    def exception(self) -> str | None:
        return None if self.asked <= self.runs_for else self.error


def test_a_query_whose_plan_outdated_just_after_it_was_seen_running_is_started_again() -> None:
    """The round that saw the query run does not count its failure a moment later; the next
    round starts it again. (The runner once asked twice per round, and a failure between
    the two questions stopped ingest for good.)"""
    outdated_plan = "Traceback (most recent call last):\n  x\nPlanOutdated: ids [1] -> [1, 2]\n"
    failing, again = Query("ingest", outdated_plan, runs_for=1), Query("ingest", None, 10)
    reference = Query("reference", None, runs_for=10)
    queries: list[Any] = [failing, reference]
    restart = {"ingest": lambda: again}
    assert restart_outdated("ingest", queries, restart) is True
    assert queries == [failing, reference]
    assert restart_outdated("ingest", queries, restart) is True
    assert queries == [again, reference]


def test_any_other_failure_or_no_query_left_running_ends_the_run() -> None:
    other = Query("ingest", PYTHON_FAILURE)
    assert restart_outdated("ingest", [other, Query("reference", None, 10)],
                            {"ingest": lambda: Query("ingest", None, 10)}) is False
    planned_anew = Query("speed", "x\nPlanOutdated: ids\n")
    assert restart_outdated("speed", [planned_anew], {}) is False  # no starter: a failure
    assert restart_outdated("ingest", [Query("ingest", None), Query("reference", None)],
                            {}) is False  # both stopped cleanly
