"""Publish one benchmark run as the Performance page's figures.

    python -m bench.publish bench/results/2026-11-23T171110+0000

The run's ``results.json``, ``report.md`` and charts replace ``docs/benchmarks/``, and the
block between the ``bench-report`` markers of ``docs/performance.md`` is rewritten from that
JSON; a repository test keeps the two equal, so the page quotes exactly what a run measured.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path
from typing import Any

from bench.harness.common import Result
from bench.run import machine_line, table
from tests.support.repo import REPO

PUBLISHED = REPO / "docs" / "benchmarks"
PAGE = REPO / "docs" / "performance.md"
START, END = "<!-- bench-report -->", "<!-- /bench-report -->"
RUN_FILES = ("results.json", "report.md", "*.png")


def page_block(document: dict[str, Any], charts: list[str]) -> str:
    """The Performance page's text for a published run: how it was made, its table, its
    charts (links relative to ``docs/``, where the page is)."""
    meta = document["meta"]
    command = f"python -m bench.run --profile {meta['profile']}"
    if meta.get("only") or len(meta["benchmarks"]) == 1:  # runs before 2026-11-28: no "only"
        command += " --only " + " ".join(meta["benchmarks"])
    lines = [f"`{command}`, {meta['started']}, {meta['seconds'] / 60:.0f} min; "
             f"{machine_line(meta)}. Each figure beside its bare baseline from the same run; "
             "the whole report with every detail: "
             "[benchmarks/report.md](benchmarks/report.md).", "",
             *table([Result.from_dict(r) for r in document["results"]])]
    lines += [line for chart in charts
              for line in ("", f"![{Path(chart).stem}](benchmarks/{chart})")]
    return "\n".join(lines)


def published_block() -> str:
    """The block for what ``docs/benchmarks/`` holds now."""
    document = json.loads((PUBLISHED / "results.json").read_text())
    return page_block(document, sorted(p.name for p in PUBLISHED.glob("*.png")))


def replace_block(text: str, block: str) -> str:
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{block}\n{END}{tail}"


def published_figures(text: str) -> str:
    """What a page quotes between the markers."""
    return text.split(START, 1)[1].split(END, 1)[0].strip("\n")


def publish(run: Path) -> None:
    if not (run / "results.json").is_file():
        raise SystemExit(f"{run} holds no results.json: give a bench/results/<time>/ folder")
    shutil.rmtree(PUBLISHED, ignore_errors=True)
    PUBLISHED.mkdir(parents=True)
    for pattern in RUN_FILES:
        for file in run.glob(pattern):
            shutil.copy2(file, PUBLISHED / file.name)
    PAGE.write_text(replace_block(PAGE.read_text(), published_block()))
    print(f"published {run} to {PUBLISHED} and {PAGE.relative_to(REPO)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", type=Path, help="a bench/results/<time>/ folder")
    publish(parser.parse_args().run)


if __name__ == "__main__":
    main()
