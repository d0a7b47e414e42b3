"""The lake's object storage for real: the stack's s3proxy, and what the platform relies on
there beyond plain reads and writes (the whole platform on it: ``test_platform``).

- Several delta-rs writers of one real-time table (the speed shards, the serving step)
  never lose a commit: delta-rs commits with a conditional put that s3proxy honours.
- Spark's Delta commits there exclude each other across drivers too: the project's log
  store creates each commit file with a conditional put, and a commit that loses the race
  is refused (Delta then retries it as a conflict) instead of replacing the winner's.
- A gate's small slice is read and counted with delta-rs there (no Spark), its files
  pruned by partition and statistics.
- A speed query's counted-event state lives beside its checkpoint on S3 and comes back
  whole after a restart: a shard moved to another host resumes it.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from py4j.protocol import Py4JJavaError
from pyspark.java_gateway import ensure_callback_server_started
from pyspark.sql import SparkSession

from lambdalake.lake.delta_rs import (
    Additions,
    AdditionsReader,
    FollowedTable,
    TimeSlice,
    count_slice,
    delta_rs_uri,
    read_small_slice,
)
from lambdalake.settings import Settings
from lambdalake.speed.dedup import SeenEvents, state_directory
from lambdalake.speed.realtime import RealtimeTable
from lambdalake.stack.object_store import CONDITIONAL_PUT_LOG_STORE, LocalObjectStore, credentials
from lambdalake.views.definition import load_views
from lambdalake.views.measures import sketch_of

WRITERS, APPENDS = 3, 8
# fixed date: rows written to and read from the object store as given, never compared with now
NOON = datetime(2026, 11, 24, 12, tzinfo=UTC)


@pytest.fixture(scope="module")
def lake(settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    """A lake on its own s3proxy (the session's jars)."""
    settings = Settings(state_dir=tmp_path_factory.mktemp("object-store"),
                        jars_dir=settings.jars_dir,
                        lake={"object_store": {"serve": True, "port": 29900}},
                        spark={"batch_tasks": "connect"})
    server = LocalObjectStore(settings)
    server.start()
    try:
        yield settings
    finally:
        server.stop()


def partials(writer: int, batch: int) -> pa.Table:
    """page_traffic partial rows as a speed shard appends them: two pages of one hour."""
    one = sketch_of([f"user-{writer}"], load_views()["page_traffic"].sketch_lg_k)
    return pa.table({
        "window_start": pa.array([NOON, NOON], pa.timestamp("us", tz="UTC")),
        "window_end": pa.array([NOON + timedelta(hours=1)] * 2, pa.timestamp("us", tz="UTC")),
        "page": [f"/w{writer}", f"/b{batch}"],
        "views": pa.array([1, 1], pa.int64()),
        "unique_users": pa.array([one, one], pa.binary()),
        "unique_sessions": pa.array([one, one], pa.binary()),
    })


def append_as_shard(settings: Settings, writer: int) -> None:
    """One writer process: ``APPENDS`` micro-batches of shard ``writer``, each once."""
    table = RealtimeTable(settings, load_views()["page_traffic"])
    for batch in range(APPENDS):
        assert table.append(partials(writer, batch), f"speed-{writer}", batch, shard=writer)


def test_concurrent_delta_rs_writers_of_one_table_lose_no_commit(lake: Settings) -> None:
    context = multiprocessing.get_context("spawn")  # the children inherit the AWS_* variables
    writers = [context.Process(target=append_as_shard, args=(lake, writer))
               for writer in range(WRITERS)]
    for process in writers:
        process.start()
    for process in writers:
        process.join(timeout=300)
        assert process.exitcode == 0
    table = DeltaTable(delta_rs_uri(RealtimeTable(lake, load_views()["page_traffic"]).path))
    assert table.version() == WRITERS * APPENDS - 1  # every append is one version
    rows = table.to_pyarrow_table(columns=["shard", "batch_id"]).to_pylist()
    assert sorted({(row["shard"], row["batch_id"]) for row in rows}) == [
        (writer, batch) for writer in range(WRITERS) for batch in range(APPENDS)]
    assert len(rows) == 2 * WRITERS * APPENDS
    replay = RealtimeTable(lake, load_views()["page_traffic"])
    assert not replay.append(partials(0, 3), "speed-0", 3)  # a replayed batch: nothing
    assert DeltaTable(delta_rs_uri(replay.path)).version() == WRITERS * APPENDS - 1



def test_a_gate_s_small_slice_is_read_and_counted_there_without_spark(lake: Settings) -> None:
    """The gates' delta-rs reads (``read_small_slice``, ``count_slice``) on S3: files pruned
    by partition and statistics, sizes known from the log, rows as written."""
    from deltalake import write_deltalake

    path = lake.table_path("gate_slice")
    hours = [NOON - timedelta(hours=1), NOON, NOON + timedelta(minutes=30), NOON + timedelta(hours=1)]
    for n, at in enumerate(hours):  # a commit, and a file, per row
        write_deltalake(delta_rs_uri(path), pa.table({
            "day": pa.array([at.date()], pa.date32()), "at": pa.array([at], pa.timestamp("us", tz="UTC")),
            "n": [n]}), mode="append", partition_by=["day"])
    inside = TimeSlice("at", NOON, NOON + timedelta(hours=1),
                       partitions=(("day", "=", NOON.date()),))
    rows = read_small_slice(path, inside, max_rows=2)
    assert rows is not None and sorted(rows.column("n").to_pylist()) == [1, 2]
    assert count_slice(path, inside) == 2
    assert read_small_slice(path, inside, max_rows=1) is None


def s3a_configuration(spark: SparkSession, lake: Settings) -> object:
    """A Hadoop configuration of the session's JVM that reaches ``lake``'s s3proxy."""
    store, (key, secret) = lake.lake.object_store, credentials(lake) or ("", "")
    conf = spark.sparkContext._jvm.org.apache.hadoop.conf.Configuration(
        spark.sparkContext._jsc.hadoopConfiguration())
    for name, value in {
        "fs.s3a.endpoint": store.endpoint, "fs.s3a.endpoint.region": store.region,
        "fs.s3a.path.style.access": "true", "fs.s3a.connection.ssl.enabled": "false",
        "fs.s3a.access.key": key, "fs.s3a.secret.key": secret,
        "fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
        "fs.s3a.create.conditional.enabled": "true",
    }.items():
        conf.set(name, value)
    return conf


class RivalCommitsMeanwhile:
    """A ``java.util.Iterator`` of a commit's actions (called back from the JVM) that, as the
    log store reads the first action, has another writer put the same commit file: the
    race S3SingleDriverLogStore loses (it looked before writing, found nothing, and its put
    then replaces the rival's commit)."""

    def __init__(self, rival_put: Callable[[], None], *lines: str) -> None:
        self.rival_put, self.lines = rival_put, list(lines)

    def hasNext(self) -> bool:  # Java names it
        return bool(self.lines)

    def next(self) -> str:
        if self.rival_put is not None:
            self.rival_put()
            self.rival_put = None
        return self.lines.pop(0)

    class Java:
        implements = ["java.util.Iterator"]


def test_a_followed_table_finds_each_commit_and_reads_only_its_files_there(
        lake: Settings) -> None:
    """What the serving API does with each real-time table on S3 (``FollowedTable``): look
    for the next commit file, then read only the files it added, partition values included."""
    from deltalake import write_deltalake

    path = lake.table_path("followed")

    def commit(n: int) -> None:
        write_deltalake(delta_rs_uri(path), pa.table({
            "day": pa.array([NOON.date()], pa.date32()), "n": [n]}),
            mode="append", partition_by=["day"])

    folded: list[Additions] = []
    commit(0)
    reader = AdditionsReader(FollowedTable(path))
    reader.poll(folded.append)
    assert not reader.behind()
    commit(1)
    assert reader.behind()
    reader.poll(folded.append)
    assert not reader.behind()
    assert [(added.version, added.start_over) for added in folded] == [(0, False), (1, False)]
    assert [added.rows.to_pylist() for added in folded if added.rows is not None] == [
        [{"n": 0, "day": NOON.date()}], [{"n": 1, "day": NOON.date()}]]


def test_a_spark_commit_that_loses_the_race_is_refused_not_written_over(
    spark: SparkSession, lake: Settings
) -> None:
    """The log store Spark commits through on S3: with commit N already there it fails as
    Delta's FileAlreadyExistsException; and when a rival's commit N lands while its own is
    being written (after any look it could take), S3's If-None-Match refuses its put and the
    rival's commit stays."""
    jvm = spark.sparkContext._jvm
    ensure_callback_server_started(spark.sparkContext._gateway)
    conf = s3a_configuration(spark, lake)
    log_store = getattr(jvm, CONDITIONAL_PUT_LOG_STORE)(conf)
    log = f"{lake.table_path('raced')}/_delta_log"  # s3a://<bucket>/...
    first = jvm.org.apache.hadoop.fs.Path(f"{log}/{0:020}.json")
    log_store.write(first, jvm.java.util.ArrayList(['{"winner":1}']).iterator(), False, conf)
    with pytest.raises(Py4JJavaError, match="java.nio.file.FileAlreadyExistsException"):
        log_store.write(first, jvm.java.util.ArrayList(['{"loser":1}']).iterator(), False,
                        conf)
    assert list(log_store.read(first, conf)) == ['{"winner":1}']

    bucket = LocalObjectStore(lake).filesystem()

    def rival_put() -> None:
        with bucket.open_output_stream(f"{log.removeprefix('s3a://')}/{1:020}.json") as sink:
            sink.write(b'{"rival":1}\n')

    second = jvm.org.apache.hadoop.fs.Path(f"{log}/{1:020}.json")
    with pytest.raises(Py4JJavaError, match="java.nio.file.FileAlreadyExistsException"):
        log_store.write(second, RivalCommitsMeanwhile(rival_put, '{"late":1}'), False, conf)
    assert list(log_store.read(second, conf)) == ['{"rival":1}']


def events(batch: int) -> pa.Table:
    """A micro-batch: two new events, one copy of the previous batch's, one late event."""
    ids = [f"e{batch}a", f"e{batch}b", f"e{batch - 1}a", f"late{batch}"]
    times = [NOON + timedelta(minutes=batch)] * 3 + [NOON - timedelta(hours=1)]
    return pa.table({"event_id": ids, "event_type": ["page_view"] * 4,
                     "occurred_at": pa.array(times, pa.timestamp("us", tz="UTC"))})


def counted(location: str | Path, restart_after: set[int]) -> tuple[list[list[str]], dict]:
    """Ten micro-batches through a query's state at ``location``, the driver restarting
    (a new ``SeenEvents`` from what is stored) after the batches named."""
    views = [load_views()["page_traffic"]]
    seen, result = SeenEvents(location, views), []
    for batch in range(10):
        admission = seen.admit(events(batch), batch)
        seen.record(admission)
        result.append(admission.events.column("event_id").to_pylist())
        if batch in restart_after:
            seen = SeenEvents(location, views)
    return result, seen.status()


def test_counted_event_state_on_s3_survives_restarts_like_on_a_local_disk(
    lake: Settings, tmp_path: Path
) -> None:
    location = state_directory(lake.checkpoint_path("speed_page_traffic-shard-0-of-1"))
    assert location.startswith("s3a://")
    on_s3 = counted(location, restart_after={2, 5, 6})
    assert on_s3 == counted(tmp_path / "local", restart_after=set())
    assert on_s3[0][4] == ["e4a", "e4b"]  # the copy of e3a is not counted again
    assert on_s3[1]["dropped_by_watermark_total"]["page_traffic"] >= 9  # every late event
