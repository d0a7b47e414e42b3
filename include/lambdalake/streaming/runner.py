"""The driver loop of a long-running streaming application: report, stop gracefully.

``run_until_stopped`` keeps an application's status file and batch history current while
its queries run. On SIGTERM or SIGINT it stops each query as soon as that query is between
micro-batches, so the batch in flight finishes; under a backlog, where batches run back to
back, a second signal or ``GRACEFUL_STOP_SECONDS`` interrupts it instead (every sink of the
platform is idempotent per batch, so the replay after restart is harmless).
"""

from __future__ import annotations

import logging
import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from types import FrameType
from typing import TYPE_CHECKING, Any

from lambdalake.lake.ledger import BatchLedger
from lambdalake.settings import Settings
from lambdalake.streaming.progress import QuerySnapshot, record_batches, write_status

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

    from lambdalake.streaming.metrics import StreamMetrics

GRACEFUL_STOP_SECONDS = 60.0

log = logging.getLogger(__name__)


def log_to_stdout() -> None:
    """Send the platform's INFO records to standard output, a line each: a streaming
    application's output is its log file (``lambdalake.stack.process.ManagedProcess``),
    where its starts, restarts and stops belong beside Spark's own lines."""
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    platform = logging.getLogger("lambdalake")
    platform.addHandler(handler)
    platform.setLevel(logging.INFO)


class PlanOutdated(RuntimeError):
    """Raised by a micro-batch that finds its query planned with something since changed
    (the registered Avro schemas): having written nothing, the batch fails its query, and
    ``run_until_stopped`` starts the query again from its checkpoint, planned anew, within
    the same process."""


def active_query_id(spark: SparkSession, name: str) -> str:
    """The id of the running query ``name``, which Spark keeps in the query's checkpoint: the
    same across restarts, new for a new checkpoint (whose batch ids start again at 0). With
    the batch id it identifies a micro-batch for Delta's idempotent writes."""
    for query in spark.streams.active:
        if query.name == name:
            return str(query.id)
    raise RuntimeError(f"no active streaming query named {name!r}")


def query_ledger(spark: SparkSession, name: str) -> Callable[[], BatchLedger]:
    """The ``BatchLedger`` of this start of the query ``name`` (app id
    ``lambdalake-<name>-<query id>``), made at its first micro-batch, when the query's id is
    known; a query started again gets a new one, which reads its tables' logs again."""
    ledgers: list[BatchLedger] = []

    def ledger() -> BatchLedger:
        if not ledgers:  # the session that started the query (a batch's own is a clone)
            ledgers.append(BatchLedger(f"lambdalake-{name}-{active_query_id(spark, name)}"))
        return ledgers[0]

    return ledger


def run_until_stopped(
    settings: Settings,
    app: str,
    queries: Sequence[StreamingQuery],
    status: Callable[[list[QuerySnapshot]], dict[str, Any]],
    interval: float,
    restart: Mapping[str, Callable[[], StreamingQuery]] | None = None,
    metrics: StreamMetrics | None = None,
) -> None:
    """Run until every query has stopped; raise if one failed.

    ``status`` turns one snapshot of the queries into the status document; the batches
    the snapshot shows are appended to the batch history, and both reach ``metrics``. A
    query that failed with ``PlanOutdated`` is started again by its starter in ``restart``
    (by query name).
    """
    queries = list(queries)
    stop: list[float] = []  # when each stop signal arrived

    def request_stop(_signum: int, _frame: FrameType | None) -> None:
        stop.append(time.monotonic())

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, request_stop)
    recorded: dict[str, int] = {}

    def report() -> None:
        snapshots = [QuerySnapshot.of(query, recorded.get(query.name, -1)) for query in queries]
        batches = record_batches(settings, app, snapshots, recorded)
        document = status(snapshots)
        write_status(settings, app, document)
        if metrics is not None:
            metrics.observe(batches, document)

    last_status = 0.0
    try:
        running = True
        while running:
            time.sleep(min(interval, 0.5))
            if time.monotonic() - last_status >= interval:
                report()
                last_status = time.monotonic()
            if stop:
                _stop_queries(app, queries, force=len(stop) > 1
                              or time.monotonic() - stop[0] > GRACEFUL_STOP_SECONDS)
            running = restart_outdated(app, queries, {} if stop else restart or {})
    finally:
        for query in queries:
            if query.isActive:
                query.stop()
        report()
    for query in queries:
        if query.exception() is not None:
            raise RuntimeError(f"{app}: query {query.name} failed: {query.exception()}")


def restart_outdated(app: str, queries: list[StreamingQuery],
                      restart: Mapping[str, Callable[[], StreamingQuery]]) -> bool:
    """Start again each query of ``queries`` (in place) that failed with ``PlanOutdated``
    and has a starter in ``restart``; False once a query failed otherwise, or none runs.

    Each query is asked once whether it runs and once why it stopped: a query that fails
    after it was seen running is judged in the next round, never counted as failed
    before it was given its restart."""
    running, failed = False, False
    for at, query in enumerate(queries):
        if query.isActive:
            running = True
            continue
        error = query.exception()
        if error is None:
            continue  # stopped, not failed
        reason, start = outdated(str(error)), restart.get(query.name)
        if reason is None or start is None:
            failed = True
            continue
        log.info("%s: %s starts again, planned anew: %s", app, query.name, reason)
        queries[at] = start()
        running = True
    return running and not failed


def outdated(error: str) -> str | None:
    """Why a query failed with ``PlanOutdated``, if ``error`` (its exception) says it did."""
    marker = f"{PlanOutdated.__name__}: "
    return error.split(marker, 1)[1].splitlines()[0] if marker in error else None


def _stop_queries(app: str, queries: Sequence[StreamingQuery], force: bool) -> None:
    for query in queries:
        if not query.isActive:
            continue
        if not query.status["isTriggerActive"]:
            log.info("%s: stop requested; %s finished its micro-batch", app, query.name)
            query.stop()
        elif force:
            log.info("%s: stop requested; interrupting %s's micro-batch", app, query.name)
            query.stop()
