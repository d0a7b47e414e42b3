"""What every benchmark shares: an isolated stack, percentiles, and the result record."""

from __future__ import annotations

import multiprocessing
import os
import platform
import shutil
import statistics
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

import psutil

from lambdalake.contracts.registry import ContractRegistry
from lambdalake.generator.traffic import TrafficProfile
from lambdalake.kafka.registry_server import LocalSchemaRegistry
from lambdalake.kafka.schema_registry import register_contracts, registry_client
from lambdalake.kafka.topics import ensure_topic
from lambdalake.settings import Settings, TopicSettings, isolated_environment
from lambdalake.stack.kafka_broker import KafkaCluster

if TYPE_CHECKING:
    from lambdalake.quality.verdict import GateResult

BENCH_ENV = isolated_environment("bench", slot=4)
T = TypeVar("T")


@dataclass(frozen=True)
class Plot:
    """Where a result appears in the report's charts (``bench.harness.plots.CHARTS``): which chart,
    which line of it, at which x."""

    chart: str
    series: str
    x: float


@dataclass
class Result:
    """One measured figure, side by side with its bare baseline from the same run."""

    name: str
    unit: str
    value: float
    baseline: float | None = None
    baseline_name: str | None = None
    goal: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    plot: Plot | None = None

    @property
    def ratio(self) -> float | None:
        return self.value / self.baseline if self.baseline else None

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ratio": self.ratio}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Result:
        """The inverse of ``as_dict`` (for a ``results.json`` read back)."""
        values = {f.name: data[f.name] for f in fields(cls) if f.name in data}
        if values.get("plot"):
            values["plot"] = Plot(**values["plot"])
        return cls(**values)


def in_own_process(function: Callable[..., T], *args: Any) -> T:
    """``function(*args)`` in a fresh Python process, so a SparkSession it starts is its
    own: the JVM's fixed settings (driver memory) stay free for a later benchmark's."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(function, *args).result()


def gate_seconds(results: list[GateResult]) -> dict[str, float]:
    """Seconds per gated subject; prints each verdict and stops the benchmark if a gate
    failed (a benchmark times gates on good data only)."""
    for result in results:
        print(f"  {result.summary()}", flush=True)
    failed = [result.report() for result in results if not result.success]
    if failed:
        raise AssertionError("a gate failed on the benchmark data:\n" + "\n".join(failed))
    return {result.subject: round(result.seconds, 2) for result in results}


def percentile(ordered: list[float], q: float) -> float:
    """The ``q``-th percentile of ``ordered`` (sorted once by the caller: a run at
    20,000 events/s has six million delays, and sorting them for every percentile took
    minutes)."""
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def machine() -> dict[str, Any]:
    return {
        "cpus": os.cpu_count(), "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "python": platform.python_version(), "platform": platform.platform(),
        "load_avg_at_start": os.getloadavg(),
    }


@contextmanager
def bench_environment(kafka: bool = True) -> Iterator[Settings]:
    """Settings for an isolated benchmark stack (own state dir and ports), with Kafka and
    the schema registry up unless ``kafka`` is false (benchmarks that read the lake only)."""
    saved = {k: os.environ.get(k) for k in BENCH_ENV}
    os.environ.update(BENCH_ENV)
    settings = Settings()
    cluster = KafkaCluster(settings) if kafka else None
    registry = LocalSchemaRegistry(settings) if kafka else None
    try:
        if cluster and registry:
            cluster.start()
            registry.start()
        yield settings
    finally:
        if cluster and registry:
            registry.stop()
            cluster.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"p50": percentile(ordered, 50), "p95": percentile(ordered, 95),
            "p99": percentile(ordered, 99), "max": ordered[-1] if ordered else float("nan"),
            "mean": statistics.fmean(values) if values else float("nan"), "n": len(values)}


def distribution(values: list[float]) -> list[list[float]]:
    """[percentile, value] pairs that draw ``values``' distribution (finer in the tail)."""
    points = [*range(0, 90, 5), *range(90, 99), 99, 99.5, 99.9, 100]
    ordered = sorted(values)
    return [[q, percentile(ordered, q)] for q in points]


def consumption(app: str, rate: int, offered: float, records: int, seconds: float) -> Result:
    """Records a stream consumed per second while traffic arrived at ``rate`` (from the
    first produce until it had committed the last record): below the offered rate, it
    falls behind and freshness becomes the backlog's age."""
    return Result(name=f"{app} consumption at {rate:,} records/s offered", unit="records/s",
                  value=records / seconds, baseline=offered,
                  baseline_name="offered rate (records produced per second)",
                  goal="ratio ~1 (keeps up)",
                  details={"records": records, "seconds": round(seconds, 2)},
                  plot=Plot("throughput", app, rate))


def backlog(count: int, **profile: Any) -> TrafficProfile:
    """Traffic put on a topic all at once, whose event times run up to now (as if it had
    piled up during an outage): with the generator's default of 1,000 events per second of
    event time starting now, a backlog of more than 300,000 would reach past ingest's
    future-skew limit, and its valid events would be quarantined as out of range."""
    start = datetime.now(UTC) - timedelta(seconds=count / 1000)
    return TrafficProfile(count=count, start_time=start, **profile)


def drain_timeout(records: int) -> float:
    """Seconds to wait for a stream to work off ``records``: a run at a rate the stream
    cannot keep up with (20,000/s in the full profile) ends in a long drain, which is
    measured, not cut off, as long as the stream consumes 1,000 records/s or more."""
    return 600 + records / 1000


class Stopwatch:
    def __enter__(self) -> Stopwatch:
        self.started = time.perf_counter()
        return self

    def __exit__(self, *_: object) -> None:
        self.seconds = time.perf_counter() - self.started


class Measured(Protocol):
    """Processes ``ResourceSampler`` measures together (a ``ManagedProcess``: its tree)."""

    def members(self) -> list[psutil.Process]: ...

    def rss_bytes(self) -> int: ...


class BenchmarkProcess:
    """The benchmark's own process, without the stack it started: its producer, consumers
    and pollers take cores from the stack it measures (a third of two at 5,000 events/s)."""

    def members(self) -> list[psutil.Process]:
        return [psutil.Process()]

    def rss_bytes(self) -> int:
        return int(psutil.Process().memory_info().rss)


def cpu_seconds(process: Measured) -> float:
    """User + system CPU seconds of the process and its descendants, so far."""
    total = 0.0
    for member in process.members():
        try:
            times = member.cpu_times()
            total += times.user + times.system
        except psutil.NoSuchProcess:
            pass
    return total


class ResourceSampler:
    """Memory and CPU of the stack's processes while a measurement runs: resident memory
    when it starts (idle) and at its peak (sampled twice a second), and the cores each
    used on average (CPU seconds / wall seconds)."""

    def __init__(self, processes: dict[str, Measured], interval: float = 0.5) -> None:
        self.processes = processes
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self.idle_rss = {name: p.rss_bytes() for name, p in processes.items()}
        self.peak_rss = dict(self.idle_rss)

    def _sample(self) -> None:
        while not self._stop.wait(self.interval):
            for name, process in self.processes.items():
                self.peak_rss[name] = max(self.peak_rss[name], process.rss_bytes())

    def __enter__(self) -> ResourceSampler:
        self._cpu_start = {name: cpu_seconds(p) for name, p in self.processes.items()}
        self._started = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        wall = time.monotonic() - self._started
        self.cores = {name: round((cpu_seconds(p) - self._cpu_start[name]) / wall, 2)
                      for name, p in self.processes.items()}

    def figures(self) -> dict[str, dict[str, float]]:
        mib = 2**20
        return {name: {"idle_rss_mib": round(self.idle_rss[name] / mib),
                       "peak_rss_mib": round(self.peak_rss[name] / mib),
                       "cores": self.cores[name]} for name in self.processes}


def fresh_run(settings: Settings, label: str,
              events_format: Literal["json", "avro"] = "json") -> Settings:
    """Settings pointing at a new topic, lake, checkpoints and state (nothing left from
    earlier runs); producers write ``events_format`` (Avro: the contracts are registered
    under the new topic, in the registry the benchmark runs)."""
    root = settings.state_dir / "runs" / f"{label}-{uuid.uuid4().hex[:6]}"
    shutil.rmtree(root, ignore_errors=True)
    copy = settings.model_copy(deep=True)
    run = uuid.uuid4().hex[:6]
    copy.kafka.events_topic = TopicSettings(name=f"bench.{label}.{run}", partitions=3)
    copy.kafka.reference_topic = copy.kafka.reference_topic.model_copy(
        update={"name": f"bench.{label}.{run}.reference"})  # its entities' topics
    copy.lake.root = str(root / "lake")
    copy.lake.checkpoint_root = str(root / "checkpoints")
    copy.state_dir = root / "state"
    copy.kafka.events_format = events_format
    ensure_topic(copy.kafka, copy.kafka.events_topic)
    if events_format == "avro":
        register_contracts(registry_client(copy.registry), ContractRegistry(),
                           copy.kafka.events_topic.name, copy.registry.compatibility)
    return copy
