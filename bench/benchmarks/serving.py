"""Serving benchmark: latency and throughput of the query API over a realistic lake.

The lake is written with delta-rs (no Kafka, no Spark): the page_traffic view for 200
pages over 7 days of hourly windows (33,600 batch rows), published for all but the last 6
hours, and its real-time table over the last 8 hours, written as 300 small appends that
each add to every page of the then-newest hour, as the speed layer does (so serving
combines 60,000 partial rows, HLL sketches included, into one per key).

The real API, started with the stack's own command (``serving.service.uvicorn_command``:
uvicorn, ``serving.workers`` processes, each reading that lake), runs in a subprocess. At
1, 10 and 50 concurrent clients - threads, each with its own persistent httpx client,
sending requests back to back for a fixed time - four typical queries are sent in turn:
one page over 24 hours across the high-water mark, all pages of the newest hour (real-time
only), all pages of one hour three days ago (batch only), one page over the last 12 hours.
Figures: latency p99 (p50 and per query in the details) and requests/s. Baseline, in the
same run: the same clients at the same concurrency calling ``GET /health`` on the same
server, which isolates HTTP, the client and the Python web stack from the query work.
Clients and server share the machine. Before that, every answer over HTTP is checked
against ``run_query`` on a snapshot of the same lake, whose in-process time (no HTTP, one
thread) is a detail.
"""

from __future__ import annotations

import math
import os
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pyarrow as pa
from deltalake import write_deltalake

from bench.harness.common import Plot, Result, Stopwatch, summary
from lambdalake.batch.publication import Publication, publish
from lambdalake.serving.query import ViewQuery, json_value, parse_query, run_query
from lambdalake.serving.service import uvicorn_command
from lambdalake.serving.snapshot import SnapshotStore
from lambdalake.settings import Settings
from lambdalake.speed.realtime import realtime_table
from lambdalake.views.catalog import physical_table
from lambdalake.views.definition import ViewDefinition, load_views
from lambdalake.views.measures import sketch_of
from tests.support.repo import REPO

VIEW = "page_traffic"
ROWS_PATH = f"/views/{VIEW}/rows"
START = datetime(2026, 11, 1, tzinfo=UTC)  # the first day of the schedule
PAGES, HOURS = 200, 7 * 24
UNPUBLISHED_HOURS, REALTIME_HOURS, REALTIME_APPENDS = 6, 8, 300
MARK = HOURS - UNPUBLISHED_HOURS  # the high-water mark, in hours since START
CONCURRENCY = (1, 10, 50)
SECONDS = {"quick": 5, "full": 20}  # per concurrency level, for the queries and the baseline
WARM_UP_SECONDS = 1
TS = pa.timestamp("us", tz="UTC")
Sample = tuple[int, float]  # index of the request sent, latency (s)


def hour(h: int) -> datetime:
    return START + timedelta(hours=h)


def page(n: int) -> str:
    return f"/p{n}"


@dataclass(frozen=True)
class TypicalQuery:
    """A request of page_traffic: windows starting in hours [start, end) since START."""

    name: str
    start: int
    end: int
    page: str | None = None
    limit: int = 1000

    def parse(self, views: dict[str, ViewDefinition]) -> ViewQuery:
        return parse_query(views, VIEW, start=hour(self.start).isoformat(),
                           end=hour(self.end).isoformat(), where=self._where(), limit=self.limit)

    def url(self) -> str:
        params = {"from": hour(self.start).isoformat(), "to": hour(self.end).isoformat(),
                  "limit": self.limit, **({"where": self._where()[0]} if self.page else {})}
        return f"{ROWS_PATH}?{urlencode(params)}"

    def expected_sources(self) -> dict[str, int]:
        """Rows each layer answers: batch before the mark, real-time from it."""
        pages = 1 if self.page else PAGES
        batch = max(0, min(self.end, MARK) - self.start) * pages
        return {"batch": batch, "realtime": (self.end - self.start) * pages - batch}

    def _where(self) -> list[str]:
        return [f"page={self.page}"] if self.page else []


QUERIES = (
    TypicalQuery("one page, 24 h across the mark", HOURS - 24, HOURS, page(17)),
    TypicalQuery("all pages, newest hour (real-time)", HOURS - 1, HOURS),
    TypicalQuery("all pages, one hour 3 days ago (batch)", HOURS - 72, HOURS - 71),
    TypicalQuery("one page, last 12 h", HOURS - 12, HOURS, page(42)),
)


# --------------------------------------------------------------------------- lake


def lake_settings(settings: Settings) -> Settings:
    """Settings for a new lake under the bench state dir, its schedule starting at START."""
    root = settings.state_dir / "runs" / f"serving-{uuid.uuid4().hex[:6]}"
    copy = settings.model_copy(deep=True)
    copy.state_dir = root / "state"
    copy.lake.root = str(root / "lake")
    copy.lake.checkpoint_root = str(root / "checkpoints")
    copy.batch.start_date = START.date()
    return copy


def traffic(page_index: int, h: int) -> int:
    """Deterministic hourly page views: a few popular pages, a daily cycle, some noise."""
    popularity = 4000 / (page_index + 1) + 10
    daily = 1 + 0.6 * math.sin(2 * math.pi * ((h % 24) - 9) / 24)
    return round(popularity * daily) + (page_index * 7919 + h * 104_729) % 17


DISTINCT_SHARES = {"unique_users": 0.6, "unique_sessions": 0.7}
"""Distinct users and sessions of a page and hour, as a share of its views."""


def measures(views: list[int]) -> dict[str, pa.Array]:
    return {"views": pa.array(views, pa.int64()),
            **{name: pa.array([round(v * share) for v in views], pa.int64())
               for name, share in DISTINCT_SHARES.items()}}


def windows(hours: list[int]) -> dict[str, pa.Array]:
    return {"window_start": pa.array([hour(h) for h in hours], TS),
            "window_end": pa.array([hour(h + 1) for h in hours], TS)}


def write_batch_view(lake: Settings) -> int:
    """Every hour and page in the batch view (version 1); published up to MARK."""
    keys = [(h, p) for h in range(HOURS) for p in range(PAGES)]
    write_deltalake(lake.table_path(physical_table(VIEW, 1)), pa.table({
        **windows([h for h, _ in keys]),
        "page": [page(p) for _, p in keys],
        **measures([traffic(p, h) for h, p in keys]),
        "run_id": ["bench"] * len(keys), "bronze_version": pa.array([1] * len(keys), pa.int64()),
        "computed_at": pa.array([datetime.now(UTC)] * len(keys), TS),
    }), partition_by=["window_start"], mode="overwrite")
    publish(lake, [Publication(VIEW, hour(h), hour(h + 1), 1, 1, "bench") for h in range(MARK)])
    return len(keys)


def write_realtime(lake: Settings) -> int:
    """The speed layer's appends over the last hours: each adds to every page of the
    then-newest hour its events since the append before (partials, as the speed layer
    writes them, with a sketch of the new users and sessions)."""
    path, lg_k = lake.table_path(realtime_table(VIEW)), load_views()[VIEW].sketch_lg_k
    so_far = [0] * PAGES  # each page's views in the current hour, up to the last append
    current: int | None = None
    for batch_id in range(REALTIME_APPENDS):
        elapsed = (batch_id + 1) * REALTIME_HOURS / REALTIME_APPENDS  # hours into the range
        h = HOURS - REALTIME_HOURS + min(math.ceil(elapsed) - 1, REALTIME_HOURS - 1)
        share = elapsed - (h - HOURS + REALTIME_HOURS)  # of the hour, so far
        if h != current:
            so_far, current = [0] * PAGES, h
        now = [max(1, round(traffic(p, h) * share)) for p in range(PAGES)]
        write_deltalake(path, pa.table({
            **windows([h] * PAGES),
            "page": [page(p) for p in range(PAGES)],
            "views": pa.array([n - before for n, before in zip(now, so_far, strict=True)],
                              pa.int64()),
            **{name: pa.array([sketch_of(range(round(before * share_of_views),
                                                 round(n * share_of_views)), lg_k)
                               for n, before in zip(now, so_far, strict=True)], pa.binary())
               for name, share_of_views in DISTINCT_SHARES.items()},
            "batch_id": pa.array([batch_id] * PAGES, pa.int64()),
            "updated_at": pa.array([hour(HOURS - REALTIME_HOURS) + timedelta(hours=elapsed)]
                                   * PAGES, TS),
        }), partition_by=["window_start"], mode="append")
        so_far = now
    return REALTIME_APPENDS * PAGES


def build_lake(lake: Settings) -> dict[str, Any]:
    with Stopwatch() as building:
        batch_rows = write_batch_view(lake)
        realtime_rows = write_realtime(lake)
    return {"root": lake.lake.root, "pages": PAGES, "hours": HOURS, "batch_rows": batch_rows,
            "high_water_mark": json_value(hour(MARK)), "realtime_appends": REALTIME_APPENDS,
            "realtime_rows_written": realtime_rows, "built_in_seconds": round(building.seconds, 1)}


# --------------------------------------------------------------------------- in process


def milliseconds(latencies: list[float]) -> dict[str, float]:
    return {k: round(v * 1000, 3) if k != "n" else v for k, v in summary(latencies).items()}


def in_process(lake: Settings, seconds: float) -> tuple[list[list[dict]], dict[str, Any]]:
    """Each query's rows from ``run_query`` (checked), and its time on one snapshot."""
    views = load_views()
    store = SnapshotStore(lake, views)
    with Stopwatch() as refreshing:
        store.refresh()
    snapshot = store.get(VIEW)
    parsed = [query.parse(views) for query in QUERIES]
    answers = [run_query(snapshot, q).rows for q in parsed]
    for query, rows in zip(QUERIES, answers, strict=True):
        sources = {s: sum(r["source"] == s for r in rows) for s in ("batch", "realtime")}
        assert sources == query.expected_sources(), f"{query.name}: {sources}"
    samples: list[Sample] = []
    deadline = time.perf_counter() + seconds
    while (started := time.perf_counter()) < deadline:
        index = len(samples) % len(parsed)
        run_query(snapshot, parsed[index])
        samples.append((index, time.perf_counter() - started))
    return answers, {"first_snapshot_seconds": round(refreshing.seconds, 3),
                     "realtime_rows_in_snapshot": snapshot.realtime_rows.num_rows,
                     **latencies(samples)}


def latencies(samples: list[Sample]) -> dict[str, Any]:
    return {"all_ms": milliseconds([s for _, s in samples]),
            "per_query_ms": {q.name: milliseconds([s for i, s in samples if i == n])
                             for n, q in enumerate(QUERIES)}}


# --------------------------------------------------------------------------- over HTTP


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def api_server(lake: Settings) -> Iterator[str]:
    """The query API over ``lake`` in a uvicorn subprocess, up and refreshed; its URL."""
    served = lake.model_copy(deep=True)
    served.serving.port = free_port()
    log = Path(lake.lake.root).parent / "api.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            uvicorn_command(served), env={**os.environ, **served.to_environment()},
            cwd=REPO, stdout=output, stderr=subprocess.STDOUT,
        )
    try:
        base_url = served.serving.base_url
        wait_refreshed(process, base_url, log)
        yield base_url
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def wait_refreshed(process: subprocess.Popen, base_url: str, log: Path) -> None:
    """Until ``/health`` reports a first snapshot (a query would otherwise take it)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the API exited ({process.returncode}): {log.read_text()[-2000:]}")
        try:
            if httpx.get(f"{base_url}/health", timeout=2).json().get("last_refresh"):
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"the API did not refresh a snapshot in 120 s; see {log}")


def check_answers(base_url: str, answers: list[list[dict]]) -> None:
    """The server answers every query exactly as ``run_query`` on the same lake."""
    with httpx.Client(base_url=base_url) as client:
        for query, rows in zip(QUERIES, answers, strict=True):
            response = client.get(query.url())
            response.raise_for_status()
            assert response.json()["rows"] == rows, f"{query.name}: HTTP != run_query"


def client_loop(base_url: str, urls: list[str], first: int, seconds: float,
                ready: threading.Barrier) -> list[Sample]:
    """One client: its own connection, requests back to back (in turn) for ``seconds``."""
    samples: list[Sample] = []
    with httpx.Client(base_url=base_url, timeout=30) as client:
        client.get(urls[first]).raise_for_status()  # opens the connection (not timed)
        ready.wait()
        deadline = time.perf_counter() + seconds
        index = first
        while (started := time.perf_counter()) < deadline:
            response = client.get(urls[index])
            samples.append((index, time.perf_counter() - started))
            response.raise_for_status()
            index = (index + 1) % len(urls)
    return samples


def load(base_url: str, urls: list[str], clients: int,
         seconds: float) -> tuple[list[Sample], float]:
    """Every request's latency at ``clients`` concurrent clients, and the seconds it took."""
    ready = threading.Barrier(clients + 1, timeout=60)
    with ThreadPoolExecutor(clients) as pool:
        futures = [pool.submit(client_loop, base_url, urls, n % len(urls), seconds, ready)
                   for n in range(clients)]
        ready.wait()
        started = time.perf_counter()
        samples = [sample for future in futures for sample in future.result()]
    return samples, time.perf_counter() - started


def level(base_url: str, clients: int, seconds: float,
          shared: dict[str, Any]) -> list[Result]:
    """Latency and throughput of the queries and of ``/health`` at one concurrency."""
    health, health_seconds = load(base_url, ["/health"], clients, seconds)
    queries, query_seconds = load(base_url, [q.url() for q in QUERIES], clients, seconds)
    health_ms = milliseconds([s for _, s in health])
    measured = latencies(queries)
    print(f"  {clients} clients: p50 {measured['all_ms']['p50']:.1f} ms, "
          f"p99 {measured['all_ms']['p99']:.1f} ms, {len(queries) / query_seconds:,.0f} req/s "
          f"(/health p99 {health_ms['p99']:.1f} ms)", flush=True)
    baseline = "GET /health: same server, clients and concurrency"
    label = f"{clients} concurrent client{'s' if clients > 1 else ''}"
    return [
        Result(name=f"serving query latency, {label} (4 typical page_traffic queries)",
               unit="ms (p99)", value=measured["all_ms"]["p99"], baseline=health_ms["p99"],
               baseline_name=baseline, goal="p99 < 50 ms at 10 clients" if clients == 10 else None,
               details={"clients": clients, "seconds": seconds, **measured, "health_ms": health_ms,
                        **shared},
               plot=Plot("serving", "4 typical page_traffic queries", clients)),
        Result(name=f"serving query throughput, {label}", unit="requests/s",
               value=len(queries) / query_seconds, baseline=len(health) / health_seconds,
               baseline_name=baseline,
               details={"requests": len(queries), "seconds": round(query_seconds, 2),
                        "health_requests": len(health),
                        "health_seconds": round(health_seconds, 2)}),
    ]


def run(settings: Settings, profile: str) -> list[Result]:
    seconds = SECONDS[profile]
    lake = lake_settings(settings)
    shared: dict[str, Any] = {"lake": build_lake(lake)}
    answers, shared["in_process_run_query"] = in_process(lake, seconds)
    print(f"serving benchmark: lake built in {shared['lake']['built_in_seconds']} s, "
          f"run_query p99 {shared['in_process_run_query']['all_ms']['p99']:.1f} ms", flush=True)
    results: list[Result] = []
    with api_server(lake) as base_url:
        check_answers(base_url, answers)
        load(base_url, ["/health", *(q.url() for q in QUERIES)], 1, WARM_UP_SECONDS)
        for clients in CONCURRENCY:
            results += level(base_url, clients, seconds, shared)
    return results
