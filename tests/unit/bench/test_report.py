"""The benchmark report's charts and resource figures, on small made-up results."""

from __future__ import annotations

import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from bench.harness.common import (
    BenchmarkProcess,
    Plot,
    ResourceSampler,
    Result,
    backlog,
    distribution,
)
from bench.harness.plots import DISTRIBUTION_FILE, write_plots
from bench.run import markdown
from lambdalake.generator.traffic import TrafficGenerator
from lambdalake.stack.process import ManagedProcess

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def freshness(series: str, rate: int, p99: float) -> Result:
    delays = [p99 * n / 100 for n in range(1, 101)]
    return Result(name=f"freshness {series} {rate}", unit="s (p99)", value=p99, baseline=0.5,
                  details={"distribution": distribution(delays)},
                  plot=Plot("freshness", series, rate))


def test_each_tagged_chart_and_the_distributions_are_drawn_and_linked(tmp_path: Path) -> None:
    results = [
        freshness("speed page_traffic", 1_000, 4.0), freshness("speed page_traffic", 5_000, 40.0),
        Result(name="latency 1", unit="ms", value=6.0, baseline=2.0,
               plot=Plot("serving", "queries", 1)),
        Result(name="latency 10", unit="ms", value=45.0, baseline=24.0,
               plot=Plot("serving", "queries", 10)),
        Result(name="untagged", unit="records/s", value=7_900.0, baseline=230_000.0),
    ]
    charts = write_plots(results, tmp_path)

    assert sorted(c.name for c in charts) == sorted(
        ["freshness.png", "serving.png", DISTRIBUTION_FILE])
    for chart in charts:
        assert chart.read_bytes().startswith(PNG_SIGNATURE)
        assert chart.stat().st_size > 10_000, f"{chart.name} looks empty"
    report = markdown(results, {"profile": "quick", "started": "now", "machine": {
        "cpus": 2, "memory_gib": 24, "load_avg_at_start": (0.5, 0.5, 0.5)}}, charts)
    assert "![serving](serving.png)" in report and "| untagged | 7,900.00 records/s" in report


def test_the_distribution_is_finer_in_the_tail() -> None:
    values = [float(n) for n in range(1, 1001)]
    points = dict((q, v) for q, v in distribution(values))
    assert points[0] == 1.0 and points[100] == 1000.0
    assert points[50] == 501.0 and points[99] == 990.0 and points[99.9] == 999.0
    assert [q for q in points if q > 90] == [91, 92, 93, 94, 95, 96, 97, 98, 99, 99.5, 99.9, 100]


def started_python(tmp_path: Path, name: str, body: str) -> ManagedProcess:
    """A Python child running ``body``, returned once its interpreter is up (as the stack's
    processes are when a benchmark samples them), not while it is still being exec'd."""
    ready = tmp_path / f"{name}.ready"
    process = ManagedProcess(name, tmp_path / "run")
    process.start([sys.executable, "-c",
                   f"import pathlib, time\npathlib.Path({str(ready)!r}).touch()\n{body}"])
    deadline = time.monotonic() + 30
    while not ready.exists():
        assert time.monotonic() < deadline, f"{name} did not start within 30 s"
        time.sleep(0.05)
    return process


def test_the_sampler_sees_a_busy_process_use_a_core_and_memory(tmp_path: Path) -> None:
    busy = started_python(tmp_path, "busy", "end = time.time() + 30\nwhile time.time() < end: pass")
    idle = started_python(tmp_path, "idle", "time.sleep(30)")
    try:
        with ResourceSampler({"busy": busy, "idle": idle}, interval=0.1) as sampler:
            time.sleep(1.5)
        figures = sampler.figures()
    finally:
        busy.kill()
        idle.kill()
    # the machine is shared: the busy loop gets at least a fair slice, the sleeper nothing
    assert figures["busy"]["cores"] > 0.2, figures
    assert figures["idle"]["cores"] < 0.05, figures
    assert figures["busy"]["peak_rss_mib"] >= figures["busy"]["idle_rss_mib"] > 0


def test_the_benchmarks_own_cpu_is_its_process_without_the_stack_it_started(
        tmp_path: Path) -> None:
    busy_child = started_python(
        tmp_path, "busy", "end = time.time() + 30\nwhile time.time() < end: pass")
    try:
        with ResourceSampler({"benchmark": BenchmarkProcess()}, interval=0.1) as resting:
            time.sleep(1.0)
        with ResourceSampler({"benchmark": BenchmarkProcess()}, interval=0.1) as working:
            end = time.monotonic() + 1.0
            while time.monotonic() < end:
                pass
    finally:
        busy_child.kill()
    assert resting.figures()["benchmark"]["cores"] < 0.05  # the busy child not counted
    assert working.figures()["benchmark"]["cores"] > 0.2
    assert working.figures()["benchmark"]["idle_rss_mib"] > 0


def test_a_result_read_back_from_json_is_the_same_result() -> None:
    result = freshness("speed page_traffic", 5_000, 40.0)
    assert Result.from_dict(json.loads(json.dumps(result.as_dict()))) == result


def test_a_backlogs_event_times_end_by_the_time_it_is_made() -> None:
    """So ingest, which quarantines event times more than 300 s ahead, takes every valid
    event of a backlog however large (at 1,000 events per second of event time, a 2M
    backlog starting now would reach 33 minutes ahead)."""
    made = datetime.now(UTC)
    times = [datetime.fromisoformat(r.event["occurred_at"]) for r in TrafficGenerator(
        backlog(20_000, malformed_fraction=0.0, late_fraction=0.0)).records()]

    assert max(times) <= made
    assert (max(times) - min(times)).total_seconds() >= 19.9


def test_the_published_command_names_the_benchmarks_a_run_was_limited_to() -> None:
    from bench.publish import page_block

    meta = {"profile": "full", "started": "2026-11-28T13:00:00+00:00", "seconds": 600.0,
            "machine": {"cpus": 2, "memory_gib": 23.5, "load_avg_at_start": [1.0, 1.0, 1.0]}}

    def command(**run: object) -> str:
        block = page_block({"meta": {**meta, **run}, "results": []}, [])
        return block.split("`")[1]

    assert command(benchmarks=["ingest", "batch"], only=True) == (
        "python -m bench.run --profile full --only ingest batch")
    assert command(benchmarks=["ingest", "batch"], only=False) == (
        "python -m bench.run --profile full")
    assert command(benchmarks=["ingest", "batch", "speed", "serving"]) == (  # before "only"
        "python -m bench.run --profile full")
    assert command(benchmarks=["ingest"]) == "python -m bench.run --profile full --only ingest"
