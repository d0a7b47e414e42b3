"""A failed streaming query's cause, in one line an operator reads first; and which Kafka
errors the lag probe waits out (a cluster settling) instead of failing on."""

from __future__ import annotations

from lambdalake.streaming.progress import failures, root_cause
from lambdalake.streaming.runner import outdated
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
