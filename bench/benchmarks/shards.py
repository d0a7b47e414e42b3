"""Speed shards: one speed-layer process against two shards, at the same offered rates, in
the same run (``bench.harness.speed_runs.freshness`` for each: freshness per view, consumption
against the offered rate and whether the lag grew, and every process's cores and memory, so the
memory per shard at each rate), then the sustained rate of each. Ingest runs beside the
speed layer, as in the speed benchmark.

On this machine's two cores the shards share the CPU the single process had, so the
comparison measures what a shard costs (its own driver JVM, its own reference state, a
Spark job per micro-batch each), which the capacity model in docs/capacity.md scales by.
"""

from __future__ import annotations

from bench.harness.common import Result
from bench.harness.speed_runs import freshness, sustained_rate
from lambdalake.settings import Settings

SHARD_COUNTS = (1, 2)


def run(settings: Settings, profile: str) -> list[Result]:
    full = profile == "full"
    rates = (5_000, 10_000, 20_000) if full else (5_000, 10_000)
    results: list[Result] = []
    for count in SHARD_COUNTS:
        measured = [result for rate in rates
                    for result in freshness(settings, rate, 300 if full else 30, count)]
        of = "" if count == 1 else f", {count} speed shards"
        results += [*measured, sustained_rate(
            [r for r in measured if r.name.startswith("speed")
             and " consumption at " in r.name], of)]
    return results
