"""The ingest stream: Kafka -> bronze + quarantine, exactly once, with progress reported.

One Structured Streaming query reads the events topic and hands each micro-batch to
``write_micro_batch``. Its checkpoint records which Kafka offsets each batch covered; the
Delta writes are idempotent per batch; together a restart, however abrupt, neither loses
nor duplicates a record. ``failOnDataLoss`` makes offsets lost to retention stop the query
loudly instead of being skipped.

The driver loop writes the query's progress to ``<state dir>/status/ingest.json`` (last
batch, rates, per-partition offsets, lag behind the topic's end) for the status command,
DAG sensors and benchmarks, and on SIGTERM/SIGINT lets the running micro-batch finish
before it stops.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from lambdalake.contracts import ContractRegistry
from lambdalake.ingest.validation import classify
from lambdalake.lake.bronze import write_micro_batch
from lambdalake.settings import Settings

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

QUERY_NAME = "ingest"
GRACEFUL_STOP_SECONDS = 60.0


def status_path(settings: Settings, query: str = QUERY_NAME) -> Path:
    return settings.state_dir / "status" / f"{query}.json"


def read_status(settings: Settings, query: str = QUERY_NAME) -> dict[str, Any] | None:
    try:
        return json.loads(status_path(settings, query).read_text())
    except FileNotFoundError:
        return None


def history_path(settings: Settings, query: str = QUERY_NAME) -> Path:
    return settings.state_dir / "status" / f"{query}-batches.jsonl"


def _write_status(settings: Settings, document: dict[str, Any]) -> None:
    path = status_path(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".tmp")
    partial.write_text(json.dumps(document, default=str))
    partial.replace(path)  # readers never see half a file


def _record_batches(settings: Settings, query: StreamingQuery, after: int) -> int:
    """Append the progress of batches newer than ``after`` to the batch history (JSON lines);
    return the newest batch id recorded. Benchmarks and trend views read this history."""
    newest = after
    with history_path(settings).open("a") as history:
        for progress in query.recentProgress:
            batch = progress["batchId"]
            if batch > newest and progress["numInputRows"]:
                history.write(json.dumps({
                    "batch_id": batch, "timestamp": progress["timestamp"],
                    "input_rows": progress["numInputRows"],
                    "duration_ms": progress["durationMs"].get("triggerExecution"),
                }) + "\n")
            newest = max(newest, batch)
    return newest


def kafka_stream(spark: SparkSession, settings: Settings) -> DataFrame:
    ingest = settings.ingest
    return (
        spark.readStream.format("kafka")
        .options(**settings.kafka.spark_options())
        .option("subscribe", settings.kafka.events_topic.name)
        .option("startingOffsets", ingest.starting_offsets)
        .option("failOnDataLoss", str(ingest.fail_on_data_loss).lower())
        .option("maxOffsetsPerTrigger", ingest.max_offsets_per_trigger)
        .load()
    )


def _running_query_id(spark: SparkSession) -> str:
    """The query's id, which Spark keeps in the checkpoint: the same across restarts, new
    for a new checkpoint (whose batch ids start again at 0)."""
    for query in spark.streams.active:
        if query.name == QUERY_NAME:
            return str(query.id)
    raise RuntimeError(f"no active streaming query named {QUERY_NAME!r}")


def start_ingest(spark: SparkSession, settings: Settings) -> StreamingQuery:
    contracts = ContractRegistry()
    checkpoint = settings.checkpoint_path(QUERY_NAME)
    app_ids: list[str] = []

    def write(batch: DataFrame, batch_id: int) -> None:
        if not app_ids:  # the session that started the query (a batch's own is a clone)
            app_ids.append(f"lambdalake-ingest-{_running_query_id(spark)}")
        write_micro_batch(classify(batch, contracts, settings.ingest), settings, contracts,
                          app_ids[0], batch_id)

    return (
        kafka_stream(spark, settings).writeStream.queryName(QUERY_NAME)
        .foreachBatch(write)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime=settings.ingest.trigger_interval)
        .start()
    )


def progress_document(query: StreamingQuery) -> dict[str, Any]:
    """What the platform needs to know of the query, from its last progress report."""
    progress = query.lastProgress or {}
    sources = progress.get("sources") or [{}]
    source = sources[0]
    end = _offsets(source.get("endOffset"))
    latest = _offsets(source.get("latestOffset"))
    lag = {p: latest[p] - end.get(p, 0) for p in latest}
    return {
        "query": QUERY_NAME,
        "active": query.isActive,
        "written_at": time.time(),
        "batch_id": progress.get("batchId"),
        "batch_timestamp": progress.get("timestamp"),
        "input_rows": progress.get("numInputRows"),
        "input_rows_per_second": progress.get("inputRowsPerSecond"),
        "processed_rows_per_second": progress.get("processedRowsPerSecond"),
        "batch_duration_ms": (progress.get("durationMs") or {}).get("triggerExecution"),
        "end_offsets": end,
        "latest_offsets": latest,
        "lag_per_partition": lag,
        "lag": sum(lag.values()),
    }


def _offsets(raw: Any) -> dict[str, int]:
    """Spark reports Kafka offsets as {"topic": {"partition": offset}} (maybe as JSON text)."""
    if isinstance(raw, str):  # the first batch has no start offset: Spark says 'None'
        try:
            raw = json.loads(raw)
        except ValueError:
            raw = {}
    merged: dict[str, int] = {}
    for topic, partitions in (raw if isinstance(raw, dict) else {}).items():
        for partition, offset in partitions.items():
            merged[f"{topic}:{partition}"] = int(offset)
    return merged


def run(spark: SparkSession, settings: Settings) -> None:
    """Run the ingest query until it fails or a stop signal arrives."""
    stop: list[float] = []  # when each stop signal arrived

    def request_stop(_signum: int, _frame: FrameType | None) -> None:
        stop.append(time.monotonic())

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, request_stop)
    query = start_ingest(spark, settings)
    print(f"ingest: query {query.id} started, pid {os.getpid()}", flush=True)
    interval = settings.ingest.status_interval_seconds
    last_status = 0.0
    recorded = -1
    status_path(settings).parent.mkdir(parents=True, exist_ok=True)
    try:
        while query.isActive:
            query.awaitTermination(min(interval, 0.5))
            if time.monotonic() - last_status >= interval:
                _write_status(settings, progress_document(query))
                recorded = _record_batches(settings, query, recorded)
                last_status = time.monotonic()
            if stop and not query.status["isTriggerActive"]:
                print("ingest: stop requested; the current micro-batch has finished", flush=True)
                query.stop()
            elif stop and (len(stop) > 1 or time.monotonic() - stop[0] > GRACEFUL_STOP_SECONDS):
                # under backlog batches run back to back: interrupt; the replay is idempotent
                print("ingest: stop requested; interrupting the running micro-batch", flush=True)
                query.stop()
    finally:
        if query.isActive:
            query.stop()
        _write_status(settings, progress_document(query))
    if query.exception() is not None:
        raise RuntimeError(f"ingest query failed: {query.exception()}")
