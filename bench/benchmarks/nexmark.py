"""Nexmark benchmark: each layer's events/s per core on a generated Nexmark stream, per
query, beside a bare PySpark job computing the same query in the same run.

The stream (``bench.nexmark.generator``, seed 0, the reference's 10,000 events per second of
event time) is generated once per size and kept as Parquet in bronze's columns (the
contracts' fields and the Kafka coordinates, ``bench.nexmark.domain``). Per query (the
views of ``bench/nexmark/views``), three variants compute it over the same events:

* batch layer: the platform's Spark aggregation of the view (``lambdalake.views.aggregate``,
  what a batch run computes per view) over the cached DataFrame;
* speed layer: the view's partials (``lambdalake.speed.partials``) of micro-batches of
  ``MICRO_BATCH`` events, combined as the real-time table combines them, then the answers
  (``with_estimates``), in this process on Arrow, as each speed-layer micro-batch does;
* bare Spark: the query written by hand in PySpark over the same cached DataFrame, with the
  reference's own constructs where the view language has none (``MOD`` in q2).

The Spark variants write to Spark's ``noop`` sink (the whole result computed, nothing
stored), so the figure is the query's compute, not Delta's writes, staging or gates (the
batch benchmark measures those); the speed variant leaves out Kafka, deduplication and the
Delta append the speed benchmark measures. *Per core* is events over the CPU seconds the
benchmark's process and its children (Spark's JVM) spent in the variant: the rate on one
core, whichever cores each variant spread over. Each figure is the best of ``ROUNDS``
rounds after a warm-up on a tenth of the stream; the variants' answers are compared
(rows and the total of each query's first count) before anything is timed.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil

from bench.harness.common import Result, Stopwatch
from bench.nexmark.domain import arrow_schema, contracts, typed_rows, views
from bench.nexmark.generator import NexmarkConfig, NexmarkGenerator
from lambdalake.settings import Settings
from lambdalake.views.definition import ViewDefinition

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

SCALES = {"quick": 200_000, "full": 1_000_000}
ROUNDS = 2
MICRO_BATCH = 20_000
CHUNK = 50_000  # events generated and typed at a time (a million dicts at once: gigabytes)
GENERATOR_VERSION = 1  # a change to the generator or the columns: a new cached stream


def stream_file(settings: Settings, events: int) -> Path:
    """The Parquet file of the stream of ``events`` events, generated on first use."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = settings.state_dir / f"bench-nexmark-{events}-v{GENERATOR_VERSION}.parquet"
    if path.exists():
        return path
    schema = arrow_schema(contracts())
    generated = NexmarkGenerator(NexmarkConfig(seed=0, events=events)).events()
    path.parent.mkdir(parents=True, exist_ok=True)
    with pq.ParquetWriter(str(path) + ".part", schema) as writer:
        while chunk := list(itertools.islice(generated, CHUNK)):
            writer.write_table(pa.Table.from_pylist(typed_rows(chunk), schema))
    Path(str(path) + ".part").rename(path)
    return path


def cpu_seconds() -> float:
    """CPU seconds this process and its children (Spark's JVM) have spent so far."""
    me = psutil.Process()
    return float(sum(p.cpu_times().user + p.cpu_times().system
                     for p in [me, *me.children(recursive=True)]))


# --------------------------------------------------------------------------- variants


def bare_queries(events: DataFrame) -> dict[str, DataFrame]:
    """Each query in plain PySpark over the bids, as the Nexmark SQL writes it."""
    from pyspark.sql import functions as F

    bids = events.where(F.col("event_type") == "bid")
    euro = F.col("price") * F.lit(0.908).cast("decimal(3,3)")
    ten = F.window("occurred_at", "10 seconds")
    day = F.date_trunc("day", "occurred_at").alias("day")
    ranks = {"rank1": F.col("price") < 10_000,
             "rank2": (F.col("price") >= 10_000) & (F.col("price") < 1_000_000),
             "rank3": F.col("price") >= 1_000_000}
    bid_counts = [F.count(F.lit(1)).alias("total_bids"),
                  *(F.count(F.when(rule, 1)).alias(f"{r}_bids") for r, rule in ranks.items())]
    distinct = [aggregate for column in ("bidder", "auction") for aggregate in (
        F.count_distinct(column).alias(f"total_{column}s"),
        *(F.count_distinct(F.when(rule, F.col(column))).alias(f"{r}_{column}s")
          for r, rule in ranks.items()))]
    return {
        "nexmark_q1": bids.groupBy(ten, "auction").agg(
            F.count(F.lit(1)).alias("bids"), F.sum(euro).alias("total_euro"),
            F.min(euro).alias("lowest_euro"), F.max(euro).alias("highest_euro")),
        "nexmark_q2": bids.where(F.col("auction") % 123 == 0).groupBy(ten, "auction").agg(
            F.count(F.lit(1)).alias("bids"), F.sum("price"), F.min("price"), F.max("price")),
        "nexmark_q5": bids.groupBy(F.window("occurred_at", "10 seconds", "2 seconds"),
                                   "auction").agg(F.count(F.lit(1)).alias("bids")),
        "nexmark_q7": bids.groupBy(ten).agg(F.max("price"), F.count(F.lit(1)).alias("bids")),
        "nexmark_q14": bids.where((euro > 1_000_000) & (euro < 50_000_000))
        .groupBy(ten, "auction").agg(F.count(F.lit(1)).alias("bids"), F.sum(euro), F.max(euro)),
        "nexmark_q15": bids.groupBy(day).agg(*bid_counts, *distinct),
        "nexmark_q16": bids.groupBy(day, "channel").agg(
            *bid_counts, *distinct, F.max(F.date_trunc("minute", "occurred_at"))),
        "nexmark_q17": bids.groupBy(day, "auction").agg(
            *bid_counts, F.min("price"), F.max("price"), F.avg("price"), F.sum("price")),
    }


def speed_answers(table: pa.Table, view: ViewDefinition) -> pa.Table:
    """The speed layer's answers of ``view``: partials per micro-batch, combined."""
    import pyarrow as pa

    from lambdalake.speed.partials import merge_partials, partials_of, with_estimates

    partials = [partials_of(table.slice(start, MICRO_BATCH), view)
                for start in range(0, table.num_rows, MICRO_BATCH)]
    return with_estimates(merge_partials(pa.concat_tables(partials), view), view)


def first_count(view: ViewDefinition) -> str:
    """The query's first count, whose total the variants must agree on."""
    return next(m.name for m in view.measures if m.kind == "count")


def check_agreement(frame: DataFrame, table: pa.Table,
                    chosen: dict[str, ViewDefinition]) -> dict[str, list[int]]:
    """Rows and the total of the first count per query, equal in all three variants."""
    from pyspark.sql import functions as F

    from lambdalake.views.aggregate import aggregate

    bare = bare_queries(frame)
    checked = {}
    for name, view in chosen.items():
        count = first_count(view)
        found = {
            "batch": list(aggregate(frame, view).agg(F.count(F.lit(1)), F.sum(count)).first()
                          or []),
            "bare_spark": list(bare[name].agg(F.count(F.lit(1)), F.sum(count)).first() or []),
        }
        speed = speed_answers(table, view)
        found["speed"] = [speed.num_rows, sum(speed[count].to_pylist())]
        if not found["batch"] == found["bare_spark"] == found["speed"]:
            raise AssertionError(f"{name}: the variants disagree (rows, {count}): {found}")
        checked[name] = found["batch"]
    return checked


def computed(result: DataFrame) -> None:
    """The whole of ``result`` computed, nothing stored (Spark's ``noop`` sink)."""
    result.write.format("noop").mode("overwrite").save()


def timed(run: Callable[[], Any]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of ``run``."""
    cpu = cpu_seconds()
    with Stopwatch() as watch:
        run()
    return watch.seconds, cpu_seconds() - cpu


def measure(frame: DataFrame, table: pa.Table,
            chosen: dict[str, ViewDefinition]) -> dict[str, dict[str, tuple[float, float]]]:
    """Per query and variant, the best round's (wall, CPU) seconds."""
    from lambdalake.views.aggregate import aggregate

    bare = bare_queries(frame)
    best: dict[str, dict[str, tuple[float, float]]] = {}
    for name, view in chosen.items():
        variants: dict[str, Callable[[], Any]] = {
            "batch": partial(computed, aggregate(frame, view)),
            "bare_spark": partial(computed, bare[name]),
            "speed": partial(speed_answers, table, view),
        }
        rounds = {variant: [timed(run) for _ in range(ROUNDS)]
                  for variant, run in variants.items()}
        best[name] = {variant: min(values, key=lambda pair: pair[1])
                      for variant, values in rounds.items()}
        print(f"  {name}: " + ", ".join(f"{variant} {wall:.1f} s wall, {cpu:.1f} s CPU"
                                        for variant, (wall, cpu) in best[name].items()),
              flush=True)
    return best


def results(events: int, best: dict[str, dict[str, tuple[float, float]]],
            checked: dict[str, list[int]], cores: int) -> list[Result]:
    """A batch-layer and a speed-layer figure per query, each beside bare Spark's."""
    out = []
    label = f"{events / 1e6:g}M events"
    for name, variants in best.items():
        per_core = {variant: events / cpu for variant, (_, cpu) in variants.items()}
        details = {"events": events, "cores": cores, "rows_and_first_count_total": checked[name],
                   "wall_seconds": {v: round(w, 2) for v, (w, _) in variants.items()},
                   "cpu_seconds": {v: round(c, 2) for v, (_, c) in variants.items()},
                   "events_per_second_wall": {v: round(events / w) for v, (w, _) in
                                              variants.items()}}
        for layer in ("batch", "speed"):
            out.append(Result(
                name=f"{name} {layer} layer, {label}", unit="events/s per core",
                value=per_core[layer], baseline=per_core["bare_spark"],
                baseline_name="bare PySpark, same query and events, same run",
                goal="reference (Nexmark, #62)", details=details))
    return out


def run(settings: Settings, profile: str) -> list[Result]:
    import pyarrow.parquet as pq

    from lambdalake.spark import get_spark

    events = SCALES[profile]
    path = stream_file(settings, events)
    spark = get_spark("bench-nexmark", settings)
    chosen = views()
    try:
        frame = spark.read.parquet(str(path)).cache()
        assert frame.count() == events
        table = pq.read_table(path)
        warm = frame.limit(events // 10).cache()
        warm.count()
        measure(warm, table.slice(0, events // 10), chosen)  # JIT, codegen, Arrow
        warm.unpersist()
        checked = check_agreement(frame, table, chosen)
        best = measure(frame, table, chosen)
        frame.unpersist()
    finally:
        spark.stop()
    return results(events, best, checked, psutil.cpu_count() or 1)
