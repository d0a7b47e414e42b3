"""The lake's object storage for real: the stack's s3proxy, and what the platform relies on
there beyond plain reads and writes (the whole platform on it: ``test_platform``).

- Several delta-rs writers of one real-time table (the speed shards, the serving step)
  never lose a commit: delta-rs commits with a conditional put that s3proxy honours.
- Spark's Delta commits there exclude each other across drivers too: the project's log
  store creates each commit file with a conditional put, and a commit that loses the race
  is refused (Delta then retries it as a conflict) instead of replacing the winner's.
- A speed query's counted-event state lives beside its checkpoint on S3 and comes back
  whole after a restart: a shard moved to another host resumes it.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession

from lambdalake.lake.bookkeeping import delta_rs_uri
from lambdalake.settings import Settings
from lambdalake.speed.dedup import SeenEvents, state_directory
from lambdalake.speed.realtime import RealtimeTable
from lambdalake.stack.object_store import CONDITIONAL_PUT_LOG_STORE, LocalObjectStore, credentials
from lambdalake.views.definition import load_views
from lambdalake.views.measures import sketch_of

WRITERS, APPENDS = 3, 8
CONDITIONAL_CREATE = "fs.option.create.conditional.overwrite"  # what the log store asks s3a
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


def test_a_spark_commit_that_loses_the_race_is_refused_not_written_over(
    spark: SparkSession, lake: Settings
) -> None:
    """The log store's put is conditional: with the object already there (another writer's
    commit N), its commit N fails as Delta's FileAlreadyExistsException and the winner's
    commit stays; and the condition is S3's (If-None-Match), not a look before writing: a
    rival's put landing while a conditional create is open makes its close fail with 412."""
    jvm = spark.sparkContext._jvm
    conf = s3a_configuration(spark, lake)
    log_store = getattr(jvm, CONDITIONAL_PUT_LOG_STORE)(conf)
    log = f"{lake.table_path('raced')}/_delta_log"  # s3a://<bucket>/...

    def actions(*lines: str) -> object:
        return jvm.java.util.Arrays.asList(list(lines)).iterator()

    first = jvm.org.apache.hadoop.fs.Path(f"{log}/{0:020}.json")
    log_store.write(first, actions('{"winner":1}'), False, conf)
    with pytest.raises(Py4JJavaError, match="java.nio.file.FileAlreadyExistsException"):
        log_store.write(first, actions('{"loser":1}'), False, conf)
    assert list(log_store.read(first, conf)) == ['{"winner":1}']

    second = jvm.org.apache.hadoop.fs.Path(f"{log}/{1:020}.json")
    out = (second.getFileSystem(conf).createFile(second).overwrite(False)
           .must(CONDITIONAL_CREATE, True).build())  # the log store's create, held open
    out.write(bytearray(b'{"late":1}\n'))
    rival = LocalObjectStore(lake).filesystem()  # another writer's put lands meanwhile
    with rival.open_output_stream(f"{log.removeprefix('s3a://')}/{1:020}.json") as sink:
        sink.write(b'{"rival":1}\n')
    with pytest.raises(Py4JJavaError, match="412"):
        out.close()
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
