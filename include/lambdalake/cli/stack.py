"""Commands that run the stack: setup, up, down, clean, status, the Airflow CLI and its
init, the Spark Connect server, the object store and both streams."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import TYPE_CHECKING

from lambdalake.settings import Settings

if TYPE_CHECKING:
    from lambdalake.cli import Commands


def cmd_setup(settings: Settings, _args: argparse.Namespace) -> int:
    from lambdalake.kafka.registry_server import find_java
    from lambdalake.quality.docs import vendor_assets
    from lambdalake.stack.jars import resolve_jars
    from lambdalake.stack.secrets import keep_private

    started = time.monotonic()
    keep_private(settings.state_dir)
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
    from lambdalake.stack.airflow import ADMIN_PASSWORD
    from lambdalake.stack.secrets import secrets_dir

    platform = Platform(settings)
    seconds = platform.up()
    af = settings.airflow
    print(f"\nlambdalake is up ({seconds:.1f}s).")
    if settings.environment == "local" and af.admin_password is None:
        where = (f"(password in {secrets_dir(settings) / ADMIN_PASSWORD}: local dev, "
                 "generated once)")
    else:
        where = "(password from LAMBDALAKE_AIRFLOW__ADMIN_PASSWORD)"
    # a secret is never printed: this output lands in terminals' scrollback and CI logs
    print(f"  Airflow UI    {af.base_url}   login: {af.admin_user}")
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
    from lambdalake.operations.status import layer_freshness

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
        print("\n".join(layer_freshness(settings)))
    return 0 if all(r.running for r in rows) else 3


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


def cmd_spark_connect(settings: Settings, args: argparse.Namespace) -> int:
    """start | stop | status of the batch tasks' Spark Connect server; ``run``: in the
    foreground, as a container runs it."""
    from lambdalake.orchestration.spark_connect import (
        SparkConnectServer,
        server_command,
        server_environment,
    )
    from lambdalake.spark import redacted

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
              f"(batch tasks use {redacted(settings.spark.connect_remote)})")
        return 0 if healthy else 3
    return 0


def cmd_watchdog(settings: Settings, _args: argparse.Namespace) -> int:
    """``run``: start Airflow's services again whenever they exit, until stopped (``make
    up`` runs it; ``lambdalake.stack.watchdog``)."""
    import logging
    import threading

    from lambdalake.stack.airflow import Airflow
    from lambdalake.stack.postgres import Postgres
    from lambdalake.stack.watchdog import watch

    logging.basicConfig(stream=sys.stderr, level=logging.INFO, force=True,
                        format="%(asctime)s %(levelname)s %(message)s")
    watch(Airflow(settings), Postgres(settings), settings.airflow.watch_every_seconds,
          threading.Event())
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
        for process in service.processes:
            print(f"{process.name} running, pid {process.pid()}; log {process.log_file}")
    elif args.action == "wait":
        reached = (wait_speed_caught_up(settings, timeout=args.timeout) if speed
                   else wait_caught_up(settings, args.command, timeout=args.timeout))
        print(f"{args.command} caught up with {reached}")
    elif args.action == "status":
        document = speed_status(settings) if speed else read_status(settings, args.command)
        pids = {process.name: process.pid() for process in service.processes}
        print(json.dumps({"pids": pids, **(document or {})}, indent=2))
    return 0


def add_commands(commands: Commands) -> None:
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
    commands.add_parser(
        "airflow-init", help="migrate Airflow's DB, write the login, create pools"
    ).set_defaults(run=cmd_airflow_init)
    airflow = commands.add_parser(
        "airflow", help="run an airflow CLI command against the stack (e.g. backfill create)"
    )
    airflow.add_argument("airflow_args", nargs=argparse.REMAINDER)
    airflow.set_defaults(run=cmd_airflow)
    spark_connect = commands.add_parser(
        "spark-connect", help="the batch tasks' Spark Connect server (run: in the foreground)")
    spark_connect.add_argument("action", choices=["start", "stop", "status", "run"])
    spark_connect.set_defaults(run=cmd_spark_connect)
    object_store = commands.add_parser(
        "object-store", help="the stack's S3-compatible server (run: in the foreground)")
    object_store.add_argument("action", choices=["start", "stop", "status", "run"])
    object_store.set_defaults(run=cmd_object_store)
    watchdog = commands.add_parser(
        "watchdog", help="start Airflow's services again when they exit (run: in the foreground)")
    watchdog.add_argument("action", choices=["run"])
    watchdog.set_defaults(run=cmd_watchdog)
    for app, what, own in (("ingest", "the Kafka -> bronze stream", []),
                           ("speed", "the speed layer: Kafka -> real-time views", ["reset"])):
        stream = commands.add_parser(app, help=what)
        stream.add_argument("action", choices=["start", "stop", "restart", "status", "wait", *own],
                            help="reset: rebuild the real-time views from Kafka (stack stopped)"
                            if own else None)
        stream.add_argument("--timeout", type=float, default=600, help="for `wait`: seconds")
        stream.set_defaults(run=cmd_stream)
