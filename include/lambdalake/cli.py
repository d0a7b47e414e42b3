"""``lambdalake``: the platform's command line (the Makefile wraps it).

    lambdalake setup     resolve JVM jars from Maven Central, create state dirs
    lambdalake up        start PostgreSQL, Kafka and Airflow; wait until healthy
    lambdalake down      stop exactly what `up` started
    lambdalake clean     stop, then delete all local state (Kafka logs, lake, Airflow DB)
    lambdalake status    every process of the stack: PID, memory, health
    lambdalake demo      traffic through every layer to merged answers (needs `up`)
    lambdalake produce   generate clickstream traffic (late, duplicate, malformed) into Kafka
    lambdalake ingest    start | stop | restart | status | wait: the Kafka -> bronze stream
    lambdalake speed     start | stop | restart | status | wait | reset: Kafka -> real-time views
    lambdalake contracts check that event contracts evolve compatibly (locally and against
                         the schema registry); `contracts register` registers them there
    lambdalake query     a view's merged answer: batch before the high-water mark, real-time after
    lambdalake quality   the recorded quality-gate results, newest first
    lambdalake report    the data-quality summary, and the HTML report with its Data Docs
    lambdalake settings  every setting as an environment variable, with its default
    lambdalake docs      regenerate the docs derived from code
    lambdalake airflow ...    any airflow CLI command against the stack's DB and config
    lambdalake airflow-init   migrate Airflow's DB, write the login, create pools (containers)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from lambdalake.contracts.registry import EVENTS_DIR
from lambdalake.quality.report import LAYERS
from lambdalake.settings import PROJECT_ROOT, Settings, documented_variables, get_settings

SETTINGS_TABLE_START = "<!-- settings-table"
SETTINGS_TABLE_END = "<!-- /settings-table -->"


def cmd_setup(settings: Settings, _args: argparse.Namespace) -> int:
    from lambdalake.kafka.registry_server import find_java
    from lambdalake.quality.docs import vendor_assets
    from lambdalake.stack.jars import resolve_jars

    started = time.monotonic()
    for sub in ("logs", "run", "lake", "checkpoints"):
        (settings.state_dir / sub).mkdir(parents=True, exist_ok=True)
    jars = resolve_jars(settings)
    assets = vendor_assets(settings)
    registry_java = find_java(settings.registry.java_home) if not settings.registry.url else None
    print(f"JVM jars in {jars}, Data Docs assets in {assets} "
          f"({time.monotonic() - started:.1f}s); state in {settings.state_dir}")
    if registry_java:
        print(f"the schema registry runs on {registry_java}")
    return 0


def cmd_up(settings: Settings, _args: argparse.Namespace) -> int:
    from lambdalake.operations.platform import Platform

    platform = Platform(settings)
    seconds = platform.up()
    af = settings.airflow
    print(f"\nlambdalake is up ({seconds:.1f}s).")
    if settings.environment == "local" and af.admin_password is None:
        login = f"{af.admin_user} / {platform.airflow.admin_password}"
        where = f"(local dev login, generated once, kept in {settings.state_dir / 'secrets'})"
    else:
        login, where = af.admin_user, "(password from LAMBDALAKE_AIRFLOW__ADMIN_PASSWORD)"
    print(f"  Airflow UI    {af.base_url}   login: {login}")
    print(f"                {where}")
    print(f"  Kafka         {settings.kafka.bootstrap_servers}")
    print(f"  Schemas       {settings.registry.client_config()['url']} (Confluent-compatible)")
    pg = settings.postgres
    print(f"  PostgreSQL    {pg.host}:{pg.port}/{pg.database} (Airflow metadata)")
    print(f"  Lake          {settings.lake.root}")
    return 0


def cmd_down(settings: Settings, _args: argparse.Namespace) -> int:
    from lambdalake.operations.platform import Platform

    stopped = Platform(settings).down()
    print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))
    return 0


def cmd_clean(settings: Settings, _args: argparse.Namespace) -> int:
    from lambdalake.operations.platform import Platform

    Platform(settings).clean()
    print(f"stopped the stack and removed {settings.state_dir}")
    return 0


def cmd_status(settings: Settings, args: argparse.Namespace) -> int:
    from lambdalake.operations.platform import Platform
    from lambdalake.operations.status import print_layer_freshness

    rows = Platform(settings).status()
    if args.json:
        print(json.dumps([{"name": r.name, "pid": r.pid, "rss_bytes": r.rss_bytes} for r in rows]))
    else:
        print(f"{'process':<24}{'pid':>8}{'RSS MiB':>10}")
        for row in rows:
            pid = str(row.pid) if row.running else "stopped"
            print(f"{row.name:<24}{pid:>8}{row.rss_bytes / 2**20:>10.0f}")
        total = sum(r.rss_bytes for r in rows)
        print(f"{'total':<24}{'':>8}{total / 2**20:>10.0f}")
        print_layer_freshness(settings)
    return 0 if all(r.running for r in rows) else 3


def cmd_demo(settings: Settings, args: argparse.Namespace) -> int:
    from lambdalake.operations.demo import run_demo

    run_demo(settings, args.traffic, args.seed)
    return 0


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
    """The recorded quality-gate results, newest first."""
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


def cmd_airflow_init(settings: Settings, _args: argparse.Namespace) -> int:
    from lambdalake.stack.airflow import Airflow

    Airflow(settings).migrate()
    print("Airflow metadata migrated, login and pools in place")
    return 0


def cmd_airflow(settings: Settings, args: argparse.Namespace) -> int:
    """Any ``airflow`` CLI command, with the stack's environment (its DB, not SQLite)."""
    import subprocess

    from lambdalake.stack.airflow import Airflow, airflow_executable

    command = [airflow_executable(), *args.airflow_args]
    return subprocess.run(command, env=Airflow(settings).environment(), check=False).returncode


def settings_table() -> str:
    rows = [f"| `{name}` | `{default}` | {description} |"
            for name, default, description in documented_variables()]
    return "\n".join(["| variable | default | meaning |", "| --- | --- | --- |", *rows]) + "\n"


def cmd_settings(_settings: Settings, _args: argparse.Namespace) -> int:
    print(settings_table(), end="")
    return 0


def cmd_docs(_settings: Settings, _args: argparse.Namespace) -> int:
    """Regenerate the documentation derived from code: README's settings table, contracts."""
    from lambdalake.contracts.registry import ContractRegistry, EntityRegistry, contracts_markdown

    readme = PROJECT_ROOT / "README.md"
    text = readme.read_text()
    start = text.index("\n", text.index(SETTINGS_TABLE_START)) + 1
    end = text.index(SETTINGS_TABLE_END)
    readme.write_text(text[:start] + settings_table() + text[end:])
    (PROJECT_ROOT / "docs" / "events.md").write_text(contracts_markdown(ContractRegistry()) + "\n")
    (PROJECT_ROOT / "docs" / "entities.md").write_text(
        contracts_markdown(EntityRegistry()) + "\n")
    print("updated README.md (settings), docs/events.md and docs/entities.md")
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
    from pathlib import Path

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


def cmd_spark_connect(settings: Settings, args: argparse.Namespace) -> int:
    """start | stop | status of the batch tasks' Spark Connect server; ``run``: in the
    foreground, as a container runs it."""
    from lambdalake.orchestration.spark_connect import (
        SparkConnectServer,
        server_command,
        server_environment,
    )

    if args.action == "run":
        command = server_command(settings)
        os.execvpe(command[0], command, server_environment(settings))
    server = SparkConnectServer(settings)
    if args.action == "start":
        print(server.start())
    elif args.action == "stop":
        print("Spark Connect server stopped" if server.stop() else "it was not running")
    else:
        healthy = server.healthy()
        print(f"Spark Connect server {'healthy' if healthy else 'not running'} "
              f"(batch tasks use {settings.spark.connect_remote})")
        return 0 if healthy else 3
    return 0


def cmd_object_store(settings: Settings, args: argparse.Namespace) -> int:
    """start | stop | status of the stack's S3-compatible server (lake.object_store.serve);
    ``run``: in the foreground, as a container runs it."""
    from lambdalake.stack.object_store import LocalObjectStore

    server = LocalObjectStore(settings)
    if args.action == "run":
        command = server.command()
        os.execvp(command[0], command)
    if args.action == "start":
        print(server.start())
    elif args.action == "stop":
        print("object storage stopped" if server.stop() else "it was not running")
    else:
        healthy = server.runs_here and server.healthy()
        print(f"object storage {'healthy' if healthy else 'not running'} "
              f"(the lake: {settings.lake.root})")
        return 0 if healthy else 3
    return 0


def cmd_stream(settings: Settings, args: argparse.Namespace) -> int:
    """start | stop | restart | status | wait for a streaming application (ingest, speed:
    every shard of it); reset for the speed layer."""
    from lambdalake.speed.service import SpeedLayer, wait_speed_caught_up
    from lambdalake.speed.shards import speed_status
    from lambdalake.streaming.progress import read_status
    from lambdalake.streaming.service import StreamingService, wait_caught_up

    speed = args.command == "speed"
    service = SpeedLayer(settings) if speed else StreamingService(settings, args.command)
    processes = service.processes if isinstance(service, SpeedLayer) else [service.process]
    if args.action == "reset":
        from lambdalake.operations.reset import reset_speed_layer

        removed = reset_speed_layer(settings)
        print(f"speed layer reset: removed {len(removed)} paths "
              f"({', '.join(removed) or 'nothing to remove'}); it rebuilds on its next start")
    if args.action in ("stop", "restart"):
        stopped = service.stop()
        print(f"{args.command} stopped" if stopped else f"{args.command} was not running")
    if args.action in ("start", "restart"):
        service.start()
        for process in processes:
            print(f"{process.name} running, pid {process.pid()}; log {process.log_file}")
    elif args.action == "wait":
        reached = (wait_speed_caught_up(settings, timeout=args.timeout) if speed
                   else wait_caught_up(settings, args.command, timeout=args.timeout))
        print(f"{args.command} caught up with {reached}")
    elif args.action == "status":
        document = speed_status(settings) if speed else read_status(settings, args.command)
        print(json.dumps({"pids": {process.name: process.pid() for process in processes},
                          **(document or {})}, indent=2))
    return 0


def cmd_query(settings: Settings, args: argparse.Namespace) -> int:
    """A view's merged answer, read from Delta like the API (no server, no JVM)."""
    from lambdalake.serving.query import QueryError, parse_query, run_query
    from lambdalake.serving.snapshot import SnapshotStore
    from lambdalake.views.definition import load_views

    views = load_views()
    try:
        query = parse_query(views, args.view, start=args.start, end=args.end, where=args.where,
                            limit=args.limit, offset=args.offset,
                            max_limit=settings.serving.max_limit)
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
    columns = list(result.rows[0]) if result.rows else []
    widths = {c: max(len(c), *(len(str(r[c])) for r in result.rows)) for c in columns}
    print("  ".join(c.ljust(widths[c]) for c in columns))
    for row in result.rows:
        print("  ".join(str(row[c]).ljust(widths[c]) for c in columns))
    snapshot = result.snapshot
    print(f"({len(result.rows)} rows; batch before {snapshot['high_water_mark']} "
          f"(view v{snapshot['batch']['view_version']}), real-time after"
          + (f"; next page: --offset {result.next_offset})" if result.next_offset else ")"))
    return 0


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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lambdalake", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("setup", help="resolve JVM jars, create state dirs").set_defaults(
        run=cmd_setup)
    commands.add_parser("up", help="start the local stack").set_defaults(run=cmd_up)
    commands.add_parser("down", help="stop the local stack").set_defaults(run=cmd_down)
    commands.add_parser("clean", help="stop, then delete all local state").set_defaults(
        run=cmd_clean
    )
    status = commands.add_parser("status", help="processes, memory, health")
    status.add_argument("--json", action="store_true")
    status.set_defaults(run=cmd_status)
    demo = commands.add_parser(
        "demo", help="the main job: traffic through every layer to merged answers")
    demo.add_argument("--traffic", type=int, default=50_000, help="clickstream records")
    demo.add_argument("--seed", type=int, help="traffic seed (default: the current time)")
    demo.set_defaults(run=cmd_demo)
    commands.add_parser(
        "airflow-init", help="migrate Airflow's DB, write the login, create pools"
    ).set_defaults(run=cmd_airflow_init)
    airflow = commands.add_parser(
        "airflow", help="run an airflow CLI command against the stack (e.g. backfill create)"
    )
    airflow.add_argument("airflow_args", nargs=argparse.REMAINDER)
    airflow.set_defaults(run=cmd_airflow)
    commands.add_parser("settings", help="all settings as a Markdown table").set_defaults(
        run=cmd_settings
    )
    commands.add_parser("docs", help="regenerate docs derived from code").set_defaults(
        run=cmd_docs
    )
    contracts = commands.add_parser(
        "contracts", help="check event (and entity) contracts evolve compatibly, locally and "
        "in the registry")
    contracts.add_argument("action", nargs="?", choices=["check", "register"], default="check",
                           help="register: also create the platform's topics and register "
                           "the event contracts in the schema registry")
    contracts.add_argument("--offline", action="store_true",
                           help="check the files only (no schema registry)")
    contracts.add_argument("--dir", type=Path, default=EVENTS_DIR,
                           help="the contract files (default: the repository's schemas/events)")
    contracts.set_defaults(run=cmd_contracts)
    _add_produce(commands)
    _add_query(commands)
    quality = commands.add_parser("quality", help="recorded quality-gate results, newest first")
    quality.add_argument("--layer", choices=LAYERS)
    quality.add_argument("--subject", help="a view's name, or bronze_events")
    quality.add_argument("--failed", action="store_true", help="only the failed gates")
    quality.add_argument("--limit", type=positive_int, default=20)
    quality.add_argument("--format", choices=["table", "json"], default="table")
    quality.set_defaults(run=cmd_quality)
    report = commands.add_parser("report", help="quality summary + HTML report with Data Docs")
    report.add_argument("--newest", type=int, default=10, help="how many recent results to list")
    report.set_defaults(run=cmd_report)
    spark_connect = commands.add_parser(
        "spark-connect", help="the batch tasks' Spark Connect server (run: in the foreground)")
    spark_connect.add_argument("action", choices=["start", "stop", "status", "run"])
    spark_connect.set_defaults(run=cmd_spark_connect)
    object_store = commands.add_parser(
        "object-store", help="the stack's S3-compatible server (run: in the foreground)")
    object_store.add_argument("action", choices=["start", "stop", "status", "run"])
    object_store.set_defaults(run=cmd_object_store)
    for app, what, own in (("ingest", "the Kafka -> bronze stream", []),
                           ("speed", "the speed layer: Kafka -> real-time views", ["reset"])):
        stream = commands.add_parser(app, help=what)
        stream.add_argument("action", choices=["start", "stop", "restart", "status", "wait", *own],
                            help="reset: rebuild the real-time views from Kafka (stack stopped)"
                            if own else None)
        stream.add_argument("--timeout", type=float, default=600, help="for `wait`: seconds")
        stream.set_defaults(run=cmd_stream)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.run(get_settings(), args))
    except Exception as error:
        from lambdalake.stack.process import StackError

        if isinstance(error, StackError):
            print(f"lambdalake {args.command}: {error}", file=sys.stderr)
            return 2
        raise


def console() -> None:
    """The ``lambdalake`` command: ``main``, then exit without interpreter teardown.

    Native thread pools of the readers (Arrow's, delta-rs's) can abort a finishing process
    ("terminate called without an active exception", exit -6) after its output is complete;
    a command's result must not depend on that. Output is flushed first; nothing else of
    the command's work is pending at this point.
    """
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    console()
