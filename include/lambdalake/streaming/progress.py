"""What a streaming application reports about itself, where the rest of the platform reads it.

Each long-running Spark application (``ingest``, ``speed``) writes a status document to
``<state dir>/status/<app>.json`` every few seconds (replaced atomically, so a reader never
sees half a file) and appends the progress of each finished micro-batch to
``<state dir>/status/<app>-batches.jsonl`` (with the lag it left in Kafka). The status
command, DAG sensors, the speed layer's supervisor, the Pipeline status page and the
benchmarks read these files; none of them needs the JVM.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lambdalake.jsonfile import replace_json
from lambdalake.settings import Settings
from lambdalake.timeutil import parse_utc

if TYPE_CHECKING:
    from pyspark.sql.streaming import StreamingQuery


def status_path(settings: Settings, app: str) -> Path:
    return settings.state_dir / "status" / f"{app}.json"


def read_status(settings: Settings, app: str) -> dict[str, Any] | None:
    try:
        status: dict[str, Any] = json.loads(status_path(settings, app).read_text())
        return status
    except FileNotFoundError:
        return None


def write_status(settings: Settings, app: str, document: dict[str, Any]) -> None:
    replace_json(status_path(settings, app), document, default=str)


def history_path(settings: Settings, app: str) -> Path:
    return settings.state_dir / "status" / f"{app}-batches.jsonl"


def read_history(settings: Settings, app: str) -> list[dict[str, Any]]:
    """Every recorded batch; a batch replayed after a crash appears once per replay."""
    try:
        lines = history_path(settings, app).read_text().splitlines()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in lines if line.strip()]


def kafka_offsets(raw: Any) -> dict[str, int]:
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


def progress_time(stamp: str) -> float:
    """Epoch seconds of a timestamp in Spark's progress reports ("2026-11-22T08:59:44.658Z")."""
    return parse_utc(stamp).timestamp()


def consumed_offsets(document: dict[str, Any]) -> dict[str, int]:
    """The Kafka offsets an application has committed up to, from its status document: its
    query's, or for an application of several queries (one per view) the least of them."""
    documents = list((document.get("views") or {}).values()) or [document]
    partitions = set().union(*(d.get("end_offsets", {}) for d in documents))
    return {p: min(d.get("end_offsets", {}).get(p, 0) for d in documents) for p in partitions}


def failures(document: dict[str, Any]) -> list[str]:
    """"<query>: <cause>" for each query of a status document that stopped on a failure."""
    documents = list((document.get("views") or {}).values()) or [document]
    return [f"{d['query']}: {d['error']}" for d in documents if d.get("error")]


@dataclass(frozen=True)
class QuerySnapshot:
    """One read of a query's state: the status document and the batch history are both
    built from it, so they always agree (a batch shown as done is also recorded)."""

    name: str
    run_id: str
    active: bool
    recent: list[dict[str, Any]]  # Spark's recentProgress, oldest first
    error: str | None = None  # why a stopped query failed, in one line

    @classmethod
    def of(cls, query: StreamingQuery, recorded: int = -1) -> QuerySnapshot:
        """Read ``query``; when at most one batch finished since batch ``recorded``, only its
        last report.

        Each report is read as the JVM's JSON of it, in one call. PySpark's
        ``lastProgress``/``recentProgress`` build their objects field by field over py4j:
        measured 54 ms per last report and 1.3 s for the 29 recent ones on an idle machine
        (1.1 ms and 9.5 ms as JSON), CPU that a status written every second took from the
        stream on two cores.
        """
        last = query._jsq.lastProgress()
        if last is None:
            recent = []
        else:
            recent = [json.loads(last.json())]
            if recent[0]["batchId"] > recorded + 1:
                recent = [json.loads(report.json())
                          for report in query._jsq.recentProgress()]
        active = query.isActive
        failure = None if active else query.exception()
        return cls(query.name, str(query.id), active, recent,
                   root_cause(str(failure)) if failure is not None else None)


CAUSE_LINE = re.compile(r"^(?:Caused by: )?(?:[\w$]+\.)*[\w$]*(?:Exception|Error)\b.*$", re.M)
PYTHON_RAISED = re.compile(r"Traceback \(most recent call last\):\n(?:[ \t].*\n)*(\S.*)$", re.M)
"""A Python traceback and the line after its frames: the exception raised, whatever its
class is called (``PlanOutdated: ...`` too)."""


def root_cause(failure: str) -> str:
    """The innermost cause named in a query failure (a JVM "Caused by:" chain, or the
    exception line of a Python traceback from ``foreachBatch``, whichever comes last), else
    its first line: what an operator needs to read first, such as "No space left on
    device"."""
    causes = sorted([(m.start(), m.group(0)) for m in CAUSE_LINE.finditer(failure)]
                    + [(m.start(1), m.group(1)) for m in PYTHON_RAISED.finditer(failure)])
    if causes:
        return causes[-1][1].removeprefix("Caused by: ").strip()[:500]
    lines = [line.strip() for line in failure.splitlines() if line.strip()]
    return (lines or ["unknown failure"])[0][:500]


def kafka_position(progress: dict[str, Any]
                   ) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
    """A progress report's Kafka offsets per partition: where its batch ended, the newest
    offsets then, and the lag between them (records left in Kafka)."""
    source = (progress.get("sources") or [{}])[0]
    end = kafka_offsets(source.get("endOffset"))
    latest = kafka_offsets(source.get("latestOffset"))
    return end, latest, {p: latest[p] - end.get(p, 0) for p in latest}


def query_progress(snapshot: QuerySnapshot) -> dict[str, Any]:
    """What the platform needs to know of one query, from its last progress report."""
    progress = snapshot.recent[-1] if snapshot.recent else {}
    end, latest, lag = kafka_position(progress)
    return {
        "query": snapshot.name,
        "run_id": snapshot.run_id,
        "active": snapshot.active,
        "error": snapshot.error,
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


def record_batches(
    settings: Settings, app: str, snapshots: Sequence[QuerySnapshot], recorded: dict[str, int]
) -> list[dict[str, Any]]:
    """Append each query's batches newer than ``recorded[query name]`` to the app's batch
    history (JSON lines) and return them; ``recorded`` is updated in place."""
    new: list[dict[str, Any]] = []
    for snapshot in snapshots:
        newest = recorded.get(snapshot.name, -1)
        for progress in snapshot.recent:
            batch = progress["batchId"]
            # a report without rows is not recorded, nor taken as seen: while a query idles,
            # Spark reports the id of the *next* batch, which then runs with data
            if batch <= newest or not progress["numInputRows"]:
                continue
            newest = batch
            durations = dict(progress.get("durationMs") or {})
            new.append({
                "query": snapshot.name, "run_id": snapshot.run_id, "batch_id": batch,
                "timestamp": progress["timestamp"], "input_rows": progress["numInputRows"],
                "duration_ms": durations.pop("triggerExecution", None),
                "lag": sum(kafka_position(progress)[2].values()),  # left in Kafka after it
                "phases_ms": durations,  # where it went: addBatch (the write), walCommit, …
            })
        recorded[snapshot.name] = newest
    if new:
        path = history_path(settings, app)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as history:
            history.writelines(json.dumps(entry) + "\n" for entry in new)
    return new
