"""The Nexmark queries, as views (``bench/nexmark/views``), answer in both layers what DuckDB
computes with plain SQL over the generated events' JSON.

The truth reads the JSON lines the producer would send and writes each query as the
Nexmark SQL does (``MOD``, ``0.908 * price``, ``FILTER``, ``COUNT(DISTINCT ...)``), with a
window by what it is: the bids whose time is in ``[start, start + grain)``, for every start
a whole number of slides after the epoch. No project code computes it. The batch layer is
the Spark aggregation of a run; the speed layer the partials of micro-batches of random
sizes, combined in a shuffled order. Every measure is exact in both layers but a speed-layer
distinct count, an estimate within its stated error (``ViewDefinition.distinct_tolerance``).
The stream crosses midnight, so the daily queries (q15, q16, q17) have two days.
"""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
import pandas as pd
import pyarrow as pa
import pytest

from bench.nexmark.domain import arrow_schema, contracts, typed_rows, views
from bench.nexmark.generator import NexmarkConfig, NexmarkGenerator
from lambdalake.speed.partials import with_estimates
from lambdalake.views.aggregate import aggregate
from lambdalake.views.definition import ViewDefinition
from tests.support.ground_truth import same_value
from tests.support.micro_batches import merged_partials

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# fixed date: no Kafka, no clock; 30 seconds before midnight, so the stream spans two days
START = datetime(2026, 11, 30, 23, 59, 30, tzinfo=UTC)
CONFIG = NexmarkConfig(seed=62, events=6_000, events_per_second=100, start=START)
RANKS = {"rank1": "price < 10000", "rank2": "price >= 10000 AND price < 1000000",
         "rank3": "price >= 1000000"}


def ranked(what: str, of: str) -> str:
    """q15's and q16's counts per price rank: ``count(<of>) FILTER (WHERE <rank>)``."""
    return ", ".join(f"count({of}) FILTER (WHERE {rule}) AS {rank}_{what}"
                     for rank, rule in RANKS.items())


DAILY = (f"count(*) AS total_bids, {ranked('bids', '*')}, "
         f"count(DISTINCT bidder) AS total_bidders, {ranked('bidders', 'DISTINCT bidder')}, "
         f"count(DISTINCT auction) AS total_auctions, {ranked('auctions', 'DISTINCT auction')}")
TRUTH = {  # per view: (grain, slide) in seconds and the query over windowed(grain, slide)
    "nexmark_q1": ((10, 10), """
        SELECT window_start, auction, count(*) AS bids, sum(0.908 * price) AS total_euro,
               min(0.908 * price) AS lowest_euro, max(0.908 * price) AS highest_euro
        FROM windowed GROUP BY window_start, auction"""),
    "nexmark_q2": ((10, 10), """
        SELECT window_start, auction, count(*) AS bids, sum(price) AS total_price,
               min(price) AS lowest_price, max(price) AS highest_price
        FROM windowed WHERE MOD(auction, 123) = 0 GROUP BY window_start, auction"""),
    "nexmark_q5": ((10, 2), """
        SELECT window_start, auction, count(*) AS bids FROM windowed
        GROUP BY window_start, auction"""),
    "nexmark_q7": ((10, 10), """
        SELECT window_start, max(price) AS highest_price, count(*) AS bids FROM windowed
        GROUP BY window_start"""),
    "nexmark_q14": ((10, 10), """
        SELECT window_start, auction, count(*) AS bids, sum(0.908 * price) AS total_euro,
               max(0.908 * price) AS highest_euro
        FROM windowed WHERE 0.908 * price > 1000000 AND 0.908 * price < 50000000
        GROUP BY window_start, auction"""),
    "nexmark_q15": ((86400, 86400), f"""
        SELECT window_start, {DAILY} FROM windowed GROUP BY window_start"""),
    "nexmark_q16": ((86400, 86400), f"""
        SELECT window_start, channel, {DAILY},
               max(date_trunc('minute', occurred_at)) AS minute
        FROM windowed GROUP BY window_start, channel"""),
    "nexmark_q17": ((86400, 86400), f"""
        SELECT window_start, auction, count(*) AS total_bids, {ranked('bids', '*')},
               min(price) AS min_price, max(price) AS max_price, avg(price) AS avg_price,
               sum(price) AS sum_price
        FROM windowed GROUP BY window_start, auction"""),
}
# q5 as the reference has it: per window, the auctions with the most bids
HOT_ITEMS = """
    WITH counts AS (SELECT window_start, auction, count(*) AS bids FROM windowed
                    GROUP BY window_start, auction)
    SELECT window_start, auction FROM counts
    WHERE bids = (SELECT max(bids) FROM counts AS c WHERE c.window_start = counts.window_start)
"""


@pytest.fixture(scope="module")
def events() -> list[dict[str, Any]]:
    return list(NexmarkGenerator(CONFIG).events())


@pytest.fixture(scope="module")
def bids(events: list[dict[str, Any]], tmp_path_factory: pytest.TempPathFactory
         ) -> duckdb.DuckDBPyConnection:
    """DuckDB with the bids read from the events' JSON lines, as the producer sends them."""
    path = tmp_path_factory.mktemp("nexmark") / "events.jsonl"
    path.write_text("".join(json.dumps(event) + "\n" for event in events))
    db = duckdb.connect()
    db.execute(f"""
        CREATE TABLE bid AS
        SELECT auction, bidder, price, channel,
               strptime(occurred_at, '%Y-%m-%dT%H:%M:%S.%gZ') AS occurred_at
        FROM read_json('{Path(path)}', format = 'newline_delimited',
                       columns = {{event_type: 'VARCHAR', auction: 'BIGINT', bidder: 'BIGINT',
                                   price: 'BIGINT', channel: 'VARCHAR', occurred_at: 'VARCHAR'}})
        WHERE event_type = 'bid'""")
    return db


def truth_of(db: duckdb.DuckDBPyConnection, grain: int, slide: int, query: str
             ) -> pd.DataFrame:
    """``query`` over ``windowed``: each bid once in every window of ``grain`` seconds,
    starting every ``slide`` seconds since the epoch, that holds its time."""
    db.execute(f"""
        CREATE OR REPLACE TEMP VIEW windowed AS
        WITH bounds AS (SELECT epoch(min(occurred_at))::BIGINT AS first,
                               epoch(max(occurred_at))::BIGINT AS last FROM bid),
             starts AS (SELECT to_timestamp(s)::TIMESTAMPTZ AT TIME ZONE 'UTC' AS window_start
                        FROM bounds, range(first // {slide} * {slide} - {grain},
                                           last + 1, {slide}) AS r(s))
        SELECT starts.window_start, bid.* FROM starts JOIN bid
          ON bid.occurred_at >= starts.window_start
         AND bid.occurred_at < starts.window_start + INTERVAL {grain} SECOND""")
    return db.execute(query).df()


Keyed = dict[tuple[Any, ...], dict[str, Any]]


def keyed(rows: list[dict[str, Any]], view: ViewDefinition) -> Keyed:
    """Rows by their key, the window's start as naive UTC."""
    def start(value: Any) -> pd.Timestamp:
        moment = pd.Timestamp(value)
        return moment.tz_convert("UTC").tz_localize(None) if moment.tzinfo else moment
    return {(start(row["window_start"]), *(row[d] for d in view.dimensions)): row
            for row in rows}


def disagreements(truth: Keyed, answer: Keyed, view: ViewDefinition, speed: bool) -> list[Any]:
    """Each (key, measure, truth, answer) the layer's answer gets wrong."""
    wrong: list[Any] = [("keys", sorted(truth.keys() ^ answer.keys()))] if (
        truth.keys() != answer.keys()) else []
    for key in truth.keys() & answer.keys():
        for measure in view.measures:
            want, got = truth[key][measure.name], answer[key][measure.name]
            if speed and measure.kind == "distinct_count":
                ok = abs(int(got) - int(want)) <= view.distinct_tolerance(int(want), 4)
            else:
                ok = same_value(measure.kind, want, got)
            if not ok:
                wrong.append((key, measure.name, want, got))
    return wrong


@pytest.mark.parametrize("name", sorted(TRUTH))
def test_both_layers_answer_the_nexmark_query_as_duckdb_does(
    name: str, spark: SparkSession, events: list[dict[str, Any]],
    bids: duckdb.DuckDBPyConnection,
) -> None:
    view = views()[name]
    (grain, slide), query = TRUTH[name]
    assert (view.grain_seconds, view.slide_seconds) == (grain, slide)
    truth = keyed(truth_of(bids, grain, slide, query).to_dict("records"), view)
    assert len(truth) >= 2, "the stream gives the query something to answer"
    schema = arrow_schema(contracts())
    rows = typed_rows(events)
    frame = spark.createDataFrame(pa.Table.from_pylist(rows, schema).to_pandas())
    batch = keyed([row.asDict() for row in aggregate(frame, view).collect()], view)
    speed = keyed(with_estimates(merged_partials(rows, schema, view, seed=62, largest=700),
                                 view).to_pylist(), view)
    assert disagreements(truth, batch, view, speed=False) == [], "batch"
    assert disagreements(truth, speed, view, speed=True) == [], "speed"


def test_q5s_hot_items_are_the_auctions_with_the_most_bids_in_the_views_rows(
    spark: SparkSession, events: list[dict[str, Any]], bids: duckdb.DuckDBPyConnection,
) -> None:
    """The step q5 takes after the counts (the arg-max per window), over the view's rows,
    gives the reference's hot items."""
    view = views()["nexmark_q5"]
    hot = truth_of(bids, 10, 2, HOT_ITEMS)
    want = {(row.window_start, row.auction) for row in hot.itertuples()}
    frame = spark.createDataFrame(pa.Table.from_pylist(
        typed_rows(events), arrow_schema(contracts())).to_pandas())
    counts: dict[pd.Timestamp, dict[int, int]] = defaultdict(dict)
    for (start, auction), row in keyed(
            [row.asDict() for row in aggregate(frame, view).collect()], view).items():
        counts[start][auction] = row["bids"]
    got = {(start, auction) for start, per in counts.items() for auction, bids_ in per.items()
           if bids_ == max(per.values())}
    assert got == want
