"""Commands about the data: the demo, the traffic generator, the contracts, queries and
batch runs over an interval."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from lambdalake.settings import Settings
from lambdalake.timeutil import utc_argument

if TYPE_CHECKING:
    from lambdalake.cli import Commands


def cmd_demo(settings: Settings, args: argparse.Namespace) -> int:
    from lambdalake.operations.demo import run_demo

    run_demo(settings, args.traffic, args.seed, echo=print)
    return 0


def cmd_recompute(settings: Settings, args: argparse.Namespace) -> int:
    """One run of the batch DAG through Airflow's REST API, over [--start, --end) as its
    data interval (Airflow's ``dags trigger`` cannot set one), or a full reprocess."""
    from lambdalake.operations.restatement import BATCH_DAG_ID
    from lambdalake.orchestration.airflow_api import trigger_client
    from lambdalake.timeutil import iso_utc
    from lambdalake.views.definition import load_views

    bounds = [bound for bound in (args.start, args.end) if bound is not None]
    unknown = sorted(set(args.views or []) - set(load_views()))
    problem = None
    if unknown:
        problem = f"unknown views {unknown}"
    elif args.full_reprocess and bounds:
        problem = "a full reprocess covers all of history: no --start or --end"
    elif not args.full_reprocess and len(bounds) < 2:
        problem = "give --start and --end (or --full-reprocess)"
    if problem:
        print(f"lambdalake recompute: {problem}", file=sys.stderr)
        return 2
    conf: dict[str, Any] = {"full_reprocess": args.full_reprocess}
    if args.views:
        conf["views"] = args.views
    interval = None if args.full_reprocess else (args.start, args.end)
    run_id = trigger_client(settings).trigger(BATCH_DAG_ID, conf, interval=interval)
    what = "a full reprocess" if interval is None else \
        f"[{iso_utc(args.start)}, {iso_utc(args.end)})"
    print(f"triggered {BATCH_DAG_ID} run {run_id} for {what}: "
          f"{settings.airflow.base_url}/dags/{BATCH_DAG_ID}/runs/{quote(run_id, safe='')}")
    return 0


def cmd_contracts(settings: Settings, args: argparse.Namespace) -> int:
    from lambdalake.contracts.registry import (
        ContractError,
        ContractRegistry,
        EntityRegistry,
        evolution_problems,
    )
    from lambdalake.kafka.schema_registry import (
        UNREACHABLE,
        register_contracts,
        registry_client,
        registry_problems,
    )
    from lambdalake.kafka.topics import ensure_platform_topics
    from lambdalake.stack.process import StackError

    if args.offline and args.action == "register":
        raise StackError("register needs the schema registry: drop --offline")
    contracts = ContractRegistry(args.dir)
    topic, url = settings.kafka.events_topic.name, settings.registry.client_config()["url"]
    problems = evolution_problems(contracts) + evolution_problems(EntityRegistry())
    try:
        if not args.offline:
            client = registry_client(settings.registry)
            problems += registry_problems(client, contracts, topic)
        if not problems and args.action == "register":
            for state in ensure_platform_topics(settings.kafka):
                print(f"topic {state.name}: {'created' if state.created else 'as configured'}")
            for entry in register_contracts(client, contracts, topic,
                                            settings.registry.compatibility):
                print(f"registered {entry.subject} v{entry.version} (schema id "
                      f"{entry.schema_id}, {settings.registry.compatibility})")
    except ContractError as refused:
        problems.append(str(refused))
    except UNREACHABLE as error:
        raise StackError(f"the schema registry at {url} does not answer ({error}): start the "
                         "stack (`make up`), or check the files only with --offline") from error
    for problem in problems:
        print(f"incompatible: {problem}", file=sys.stderr)
    if not problems and args.action == "check":
        where = "locally" if args.offline else f"locally and in {url}"
        versions = ", ".join(f"{t} v{v}" for t, v in sorted(contracts.contracts))
        print(f"contracts compatible ({where}): {versions}")
    return 1 if problems else 0


def cmd_produce(settings: Settings, args: argparse.Namespace) -> int:
    from lambdalake.generator.traffic import TrafficProfile, produce_traffic
    from lambdalake.kafka.producer import EventProducer, stop_on_signals
    from lambdalake.kafka.topics import ensure_topic
    from lambdalake.operations.traffic import reference_producers, traffic_generator

    profile = TrafficProfile(
        count=args.count, rate=args.rate, users=args.users, pages=args.pages,
        products=args.products, key_skew=args.key_skew, late_fraction=args.late,
        max_lateness_minutes=args.max_lateness_minutes, duplicate_fraction=args.duplicates,
        malformed_fraction=args.malformed, seed=args.seed,
        reference_change_every=args.reference_every,
    )
    topic = settings.kafka.events_topic
    ensure_topic(settings.kafka, topic)
    producer = EventProducer(settings.kafka, topic.name)
    reference = reference_producers(settings) if args.reference_every else None
    with stop_on_signals() as stop:
        manifest = produce_traffic(traffic_generator(settings, profile), producer,
                                   progress=args.count >= 50_000 and sys.stderr.isatty(),
                                   stop_requested=stop, reference=reference)
    path = Path(args.manifest) if args.manifest else (
        settings.state_dir / "manifests" / f"produce-seed{args.seed}-{int(time.time())}.json"
    )
    manifest.write(path)
    print(f"produced {manifest.produced} records to {topic.name}: "
          f"{dict(sorted(manifest.counts.items()))}; acknowledged {manifest.acknowledged}, "
          f"failed {manifest.failed}; manifest {path}")
    if manifest.reference_changes:
        print(f"produced {len(manifest.reference_changes)} reference changes "
              f"({manifest.reference_acknowledged} acknowledged) to "
              f"{settings.kafka.reference_topic.name}.<entity>")
    return 0 if manifest.failed == 0 and manifest.acknowledged == manifest.produced and (
        manifest.reference_acknowledged == len(manifest.reference_changes)) else 1


def cmd_query(settings: Settings, args: argparse.Namespace) -> int:
    """A view's merged answer, read from Delta like the API (no server, no JVM)."""
    from lambdalake.serving.query import QueryError, parse_query, run_query
    from lambdalake.serving.snapshot import SnapshotStore
    from lambdalake.views.definition import load_views

    views = load_views()
    try:
        query = parse_query(views, args.view, start=args.start, end=args.end, where=args.where,
                            limit=args.limit, offset=args.offset,
                            max_limit=settings.serving.max_limit,
                            serve_incomplete=settings.serving.serves_incomplete)
    except QueryError as error:
        print(f"lambdalake query: {error}", file=sys.stderr)
        return 2
    store = SnapshotStore(settings, {args.view: query.view})
    result = run_query(store.get(args.view), query)
    if args.format == "json":
        print(json.dumps({"view": result.view, "rows": result.rows,
                          "next_offset": result.next_offset, "snapshot": result.snapshot},
                         indent=2))
        return 0
    print_rows(list(result.rows[0]) if result.rows else [], result.rows)
    snapshot = result.snapshot
    print(f"({len(result.rows)} rows; batch before {snapshot['high_water_mark']} "
          f"(view v{snapshot['batch']['view_version']}), real-time after"
          + (f"; next page: --offset {result.next_offset})" if result.next_offset else ")"))
    return 0


def cmd_sql(settings: Settings, args: argparse.Namespace) -> int:
    """A read-only SQL query over the merged views, read from Delta like ``POST /sql``."""
    from lambdalake.serving.snapshot import SnapshotStore
    from lambdalake.serving.sql import NoRowsYet, SqlError, SqlRunner
    from lambdalake.views.definition import load_views

    views = load_views()
    runner = SqlRunner(SnapshotStore(settings, views), views, settings.serving)
    try:
        answer = runner.answer(args.statement, args.max_rows)
    except (SqlError, NoRowsYet) as error:
        print(f"lambdalake sql: {error}", file=sys.stderr)
        return 2
    if args.format == "json":
        print(json.dumps({"columns": answer.columns, "rows": answer.rows,
                          "truncated": answer.truncated, "views": answer.views}, indent=2))
        return 0
    print_rows([column["name"] for column in answer.columns], answer.rows)
    print(f"({len(answer.rows)} rows" + ("; more matched: --max-rows" if answer.truncated
                                         else "") + ")")
    return 0


def print_rows(columns: list[str], rows: list[dict[str, Any]]) -> None:
    """Rows as aligned columns under a header."""
    widths = {c: max([len(c), *(len(str(r[c])) for r in rows)]) for c in columns}
    print("  ".join(c.ljust(widths[c]) for c in columns).rstrip())
    for row in rows:
        print("  ".join(str(row[c]).ljust(widths[c]) for c in columns).rstrip())


def add_commands(commands: Commands) -> None:
    demo = commands.add_parser(
        "demo", help="the main job: traffic through every layer to merged answers")
    demo.add_argument("--traffic", type=int, default=50_000, help="clickstream records")
    demo.add_argument("--seed", type=int, help="traffic seed (default: the current time)")
    demo.set_defaults(run=cmd_demo)
    contracts = commands.add_parser(
        "contracts", help="check event (and entity) contracts evolve compatibly, locally and "
        "in the registry")
    contracts.add_argument("action", nargs="?", choices=["check", "register"], default="check",
                           help="register: also create the platform's topics and register "
                           "the event contracts in the schema registry")
    contracts.add_argument("--offline", action="store_true",
                           help="check the files only (no schema registry)")
    contracts.add_argument("--dir", type=Path,
                           help="the contract files (default: the project's schemas/events)")
    contracts.set_defaults(run=cmd_contracts)
    _add_produce(commands)
    _add_query(commands)
    _add_recompute(commands)
    sql = commands.add_parser(
        "sql", help="a read-only SQL query over the merged views (DuckDB's dialect)")
    sql.add_argument("statement", help="e.g. \"SELECT page, sum(views) FROM page_traffic "
                     "GROUP BY page\"")
    sql.add_argument("--max-rows", type=int, help="at most this many rows "
                     "(default and cap: serving.sql_max_rows)")
    sql.add_argument("--format", choices=["table", "json"], default="table")
    sql.set_defaults(run=cmd_sql)


def _add_query(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    query = commands.add_parser(
        "query", help="query a view: batch before the high-water mark, real-time after")
    query.add_argument("view", help="a view name (schemas/views/<name>.yaml)")
    query.add_argument("--from", dest="start", help="ISO-8601: windows starting at or after")
    query.add_argument("--to", dest="end", help="ISO-8601: windows starting before")
    query.add_argument("--where", action="append", default=[], metavar="DIMENSION=VALUE",
                       help="filter on a dimension (repeatable)")
    query.add_argument("--limit", type=int, default=100)
    query.add_argument("--offset", type=int, default=0)
    query.add_argument("--format", choices=["table", "json"], default="table")
    query.set_defaults(run=cmd_query)


def _add_recompute(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    recompute = commands.add_parser(
        "recompute", help="trigger one batch run over an interval (its data interval) or a "
        "full reprocess, through Airflow's REST API")
    recompute.add_argument("--start", type=utc_argument,
                           help="interval start, e.g. 2026-12-01T00:00:00Z (the views' grain)")
    recompute.add_argument("--end", type=utc_argument, help="interval end (exclusive)")
    recompute.add_argument("--views", nargs="+", metavar="VIEW",
                           help="the views to recompute (default: all)")
    recompute.add_argument("--full-reprocess", action="store_true",
                           help="rebuild the views from all of bronze into new versions")
    recompute.set_defaults(run=cmd_recompute)


def _add_produce(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    produce = commands.add_parser("produce", help="generate clickstream traffic into Kafka")
    produce.add_argument("--count", type=int, default=10_000, help="records to produce")
    produce.add_argument("--rate", type=float, default=0.0, help="records/s (0: unlimited)")
    produce.add_argument("--users", type=int, default=1_000)
    produce.add_argument("--pages", type=int, default=50)
    produce.add_argument("--products", type=int, default=200)
    produce.add_argument("--key-skew", type=float, default=1.1, help="Zipf exponent of users")
    produce.add_argument("--late", type=float, default=0.05, help="fraction of late events")
    produce.add_argument("--max-lateness-minutes", type=float, default=30.0)
    produce.add_argument("--duplicates", type=float, default=0.02, help="fraction re-sent")
    produce.add_argument("--malformed", type=float, default=0.01, help="fraction malformed")
    produce.add_argument("--seed", type=int, default=42)
    produce.add_argument("--reference-every", type=int, default=0, metavar="N",
                         help="produce the reference catalogue, then one change every N "
                         "records (0: no reference data)")
    produce.add_argument("--manifest", help="where to write the manifest (JSON)")
    produce.set_defaults(run=cmd_produce)
