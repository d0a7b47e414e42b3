"""Speed-layer benchmark: produce -> readable -> served freshness per view, and throughput.

A backlog drained by the speed application (``bench.harness.speed_runs.throughput``), then
freshness runs at the profile's offered rates with ingest beside them (``freshness``: each
view's freshness to Delta and to the query API, the rate consumed against the rate offered,
whether the lag grew, every process's memory and cores), and the sustained rate over those
runs (``sustained_rate``); ``bench.harness.speed_runs`` says how each one measures.
"""

from __future__ import annotations

from bench.harness.common import Result
from bench.harness.speed_runs import freshness, sustained_rate, throughput
from lambdalake.settings import Settings


def run(settings: Settings, profile: str) -> list[Result]:
    full = profile == "full"
    results = [throughput(settings, 1_000_000 if full else 240_000)]
    for rate in ((1_000, 5_000, 10_000, 20_000) if full else (5_000,)):
        results += freshness(settings, rate, 300 if full else 30)
    results.append(sustained_rate([r for r in results if r.name.startswith("speed consumption")]))
    return results
