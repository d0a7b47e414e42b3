"""A query's progress read as the platform reads it (``QuerySnapshot``), from a real query."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from lambdalake.streaming.progress import QuerySnapshot, query_progress

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def test_a_snapshot_holds_the_reports_of_the_batches_since_the_last_recorded(
    spark: SparkSession, tmp_path: Path,
) -> None:
    query = (spark.readStream.format("rate").option("rowsPerSecond", 100).load()
             .writeStream.queryName("progress_probe").format("noop")
             .option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(processingTime="200 milliseconds").start())
    try:
        deadline = time.monotonic() + 120
        while (last := query.lastProgress) is None or last["batchId"] < 4:
            assert time.monotonic() < deadline, "the rate query ran no 5 batches in 120 s"
            time.sleep(0.2)
        query.stop()
        everything = QuerySnapshot.of(query)
        newest = everything.recent[-1]["batchId"]
        only_last = QuerySnapshot.of(query, recorded=newest - 1)
        pyspark_last, pyspark_recent = query.lastProgress, query.recentProgress
    finally:
        query.stop()
    batches = [report["batchId"] for report in everything.recent]
    assert batches == [report["batchId"] for report in pyspark_recent] and len(batches) >= 5
    assert [report["batchId"] for report in only_last.recent] == [newest]
    assert (everything.name, everything.active, everything.error) == ("progress_probe", False,
                                                                      None)
    status = query_progress(everything)
    assert (status["batch_id"], status["batch_timestamp"], status["input_rows"],
            status["batch_duration_ms"]) == (
        pyspark_last["batchId"], pyspark_last["timestamp"], pyspark_last["numInputRows"],
        pyspark_last["durationMs"]["triggerExecution"])
