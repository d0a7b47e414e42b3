"""Commands about data quality: the recorded gate results and the report."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from lambdalake.quality.verdict import LAYERS
from lambdalake.settings import Settings

if TYPE_CHECKING:
    from lambdalake.cli import Commands


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    try:
        number = int(text)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return number


def cmd_quality(settings: Settings, args: argparse.Namespace) -> int:
    """The recorded quality-gate results, most recently recorded first."""
    from lambdalake.quality.history import read_results
    from lambdalake.quality.report import recent, table

    results = recent(read_results(settings), args.layer, args.limit, subject=args.subject,
                     failed_only=args.failed)
    print(json.dumps(results, indent=2) if args.format == "json" else table(results))
    return 0


def cmd_report(settings: Settings, args: argparse.Namespace) -> int:
    """The data-quality summary on the terminal, and the HTML report with its Data Docs."""
    from lambdalake.quality.history import read_results
    from lambdalake.quality.page import write_report
    from lambdalake.quality.report import summary

    results = read_results(settings)
    print("\n".join(summary(results, args.newest)) if results else "no validation recorded yet")
    print(f"\nHTML report: {write_report(settings)} (or the Data quality page in Airflow)")
    return 0


def add_commands(commands: Commands) -> None:
    quality = commands.add_parser(
        "quality", help="recorded quality-gate results, most recently recorded first")
    quality.add_argument("--layer", choices=LAYERS)
    quality.add_argument("--subject", help="a view's name, or bronze_events")
    quality.add_argument("--failed", action="store_true", help="only the failed gates")
    quality.add_argument("--limit", type=positive_int, default=20)
    quality.add_argument("--format", choices=["table", "json"], default="table")
    quality.set_defaults(run=cmd_quality)
    report = commands.add_parser("report", help="quality summary + HTML report with Data Docs")
    report.add_argument("--newest", type=positive_int, default=10,
                        help="how many of the most recently recorded results, and of the "
                             "failures and the warnings, to list")
    report.set_defaults(run=cmd_report)
