"""What the platform reads from a query's progress report: Spark's JSON of it, as the JVM
writes it (offsets as objects; a rate that is not a number left out)."""

from __future__ import annotations

import json

from lambdalake.streaming.progress import QuerySnapshot, kafka_offsets, query_progress

REPORT = json.loads("""{
  "id": "q", "runId": "r", "name": "speed_late_600s", "timestamp": "2026-11-24T15:00:00.000Z",
  "batchId": 7, "batchDuration": 812, "numInputRows": 4200, "processedRowsPerSecond": 5172.4,
  "durationMs": {"addBatch": 640, "latestOffset": 12, "triggerExecution": 812},
  "stateOperators": [],
  "sources": [{"description": "KafkaV2[Subscribe[events]]",
               "startOffset": {"events": {"0": 100, "1": 90}},
               "endOffset": {"events": {"0": 1500, "1": 1490}},
               "latestOffset": {"events": {"0": 1600, "1": 1490}},
               "numInputRows": 4200}],
  "sink": {"description": "ForeachBatchSink", "numOutputRows": -1}
}""")


def test_offsets_are_read_as_objects_as_json_text_or_not_at_all() -> None:
    offsets = {"events": {"0": 5, "1": 7}}
    expected = {"events:0": 5, "events:1": 7}
    assert kafka_offsets(offsets) == expected
    assert kafka_offsets(json.dumps(offsets)) == expected
    assert kafka_offsets(None) == {}
    assert kafka_offsets("None") == {}  # the first batch has no start offset


def test_the_status_of_a_query_comes_from_its_last_report() -> None:
    status = query_progress(QuerySnapshot("speed_late_600s", "r", True, [REPORT]))
    assert status["batch_id"] == 7
    assert status["input_rows"] == 4200
    assert status["batch_duration_ms"] == 812
    assert status["input_rows_per_second"] is None  # left out of the JSON: not a number
    assert status["lag_per_partition"] == {"events:0": 100, "events:1": 0}
    assert status["lag"] == 100
