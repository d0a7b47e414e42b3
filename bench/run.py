"""Run the benchmarks and write results as JSON, a Markdown table and PNG charts.

    python -m bench.run --profile quick     # minutes, for development (`make bench`)
    python -m bench.run --profile full      # every benchmark at full size (the Performance
                                            # page's published block names the command it came from)
    python -m bench.run --only batch        # some benchmarks (ingest, batch, speed, serving,
                                            # late_arrivals, restatement, dag_runs, avro,
                                            # reference, shards, nexmark), in the order given

Every figure comes with its bare baseline measured in the same run, because the machine is
shared and noisy; results land in bench/results/<timestamp>/ (``results.json`` after each
benchmark, so a long run that fails late keeps what it measured).
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.benchmarks import (
    avro,
    batch,
    dag_runs,
    ingest,
    late_arrivals,
    nexmark,
    reference,
    restatement,
    serving,
    shards,
    speed,
)
from bench.harness.common import Result, bench_environment, machine
from bench.harness.plots import write_plots

RESULTS_DIR = Path(__file__).parent / "results"
BENCHMARKS = {"ingest": ingest.run, "batch": batch.run, "speed": speed.run,
              "serving": serving.run, "late_arrivals": late_arrivals.run,
              "restatement": restatement.run, "dag_runs": dag_runs.run, "avro": avro.run,
              "reference": reference.run, "shards": shards.run, "nexmark": nexmark.run}
NEEDS_KAFKA = {"ingest", "speed", "avro", "reference", "shards"}


def _number(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.2f}"


def machine_line(meta: dict[str, Any]) -> str:
    load = ", ".join(f"{x:.2f}" for x in meta["machine"]["load_avg_at_start"])
    return (f"{meta['machine']['cpus']} CPUs, {meta['machine']['memory_gib']} GiB; "
            f"load at start {load}")


def table(results: list[Result]) -> list[str]:
    """The results as Markdown table lines, each figure beside its baseline and ratio."""
    lines = ["| benchmark | measured | baseline (same run) | ratio | goal |",
             "| --- | --- | --- | --- | --- |"]
    for r in results:
        baseline = f"{_number(r.baseline)} ({r.baseline_name})" if r.baseline else "-"
        ratio = f"{r.ratio:.2f}" if r.ratio else "-"
        lines.append(f"| {r.name} | {r.value:,.2f} {r.unit} | {baseline} | {ratio} "
                     f"| {r.goal or '-'} |")
    return lines


def markdown(results: list[Result], meta: dict[str, Any], charts: list[Path]) -> str:
    lines = [f"# lambdalake benchmarks ({meta['profile']} profile, {meta['started']})", "",
             f"Machine: {machine_line(meta)}.", "", *table(results)]
    lines += [line for chart in charts for line in ("", f"![{chart.stem}]({chart.name})")]
    lines += ["", "Details:", "", "```json",
              json.dumps({r.name: r.details for r in results}, indent=2, default=str), "```"]
    return "\n".join(lines) + "\n"


def write_results(out: Path, meta: dict[str, Any], results: list[Result]) -> None:
    (out / "results.json").write_text(
        json.dumps({"meta": meta, "results": [r.as_dict() for r in results]}, indent=2, default=str)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", choices=["quick", "full"], default="quick")
    parser.add_argument("--only", nargs="+", choices=sorted(BENCHMARKS),
                        help="run these benchmarks only")
    args = parser.parse_args()
    chosen = list(dict.fromkeys(args.only or BENCHMARKS))
    meta = {"profile": args.profile, "started": datetime.now(UTC).isoformat(timespec="seconds"),
            "benchmarks": chosen, "only": bool(args.only), "machine": machine()}
    started = time.monotonic()
    out = RESULTS_DIR / meta["started"].replace(":", "")
    out.mkdir(parents=True, exist_ok=True)
    results: list[Result] = []
    with bench_environment(kafka=bool(NEEDS_KAFKA & set(chosen))) as settings:
        for done, name in enumerate(chosen, start=1):
            results += BENCHMARKS[name](settings, args.profile)
            meta["seconds"] = round(time.monotonic() - started, 1)
            meta["finished"] = chosen[:done]  # a failure later keeps these
            write_results(out, meta, results)
    report = markdown(results, meta, write_plots(results, out))
    (out / "report.md").write_text(report)
    print(report)
    print(f"written to {out}")


if __name__ == "__main__":
    main()
