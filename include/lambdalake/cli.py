"""``lambdalake``: the platform's command line (the Makefile wraps it).

    lambdalake setup     resolve JVM jars from Maven Central, create state dirs
    lambdalake up        start PostgreSQL, Kafka and Airflow; wait until healthy
    lambdalake down      stop exactly what `up` started
    lambdalake clean     stop, then delete all local state (Kafka logs, lake, Airflow DB)
    lambdalake status    every process of the stack: PID, memory, health
    lambdalake demo      run the platform's main job through Airflow and show the result
    lambdalake settings  every setting as an environment variable, with its default
    lambdalake airflow ...    any airflow CLI command against the stack's DB and config
    lambdalake airflow-init   migrate Airflow's DB, write the login, create pools (containers)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence

from lambdalake.settings import Settings, documented_variables, get_settings

DEMO_DAG = "lambdalake_smoke"


def cmd_setup(settings: Settings, _args: argparse.Namespace) -> int:
    from lambdalake.stack.jars import resolve_jars

    started = time.monotonic()
    for sub in ("logs", "run", "lake", "checkpoints"):
        (settings.state_dir / sub).mkdir(parents=True, exist_ok=True)
    jars = resolve_jars(settings)
    print(f"JVM jars in {jars} ({time.monotonic() - started:.1f}s); state in {settings.state_dir}")
    return 0


def cmd_up(settings: Settings, _args: argparse.Namespace) -> int:
    from lambdalake.stack.platform import Platform

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
    pg = settings.postgres
    print(f"  PostgreSQL    {pg.host}:{pg.port}/{pg.database} (Airflow metadata)")
    print(f"  Lake          {settings.lake.root}")
    return 0


def cmd_down(settings: Settings, _args: argparse.Namespace) -> int:
    from lambdalake.stack.platform import Platform

    stopped = Platform(settings).down()
    print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))
    return 0


def cmd_clean(settings: Settings, _args: argparse.Namespace) -> int:
    from lambdalake.stack.platform import Platform

    Platform(settings).clean()
    print(f"stopped the stack and removed {settings.state_dir}")
    return 0


def cmd_status(settings: Settings, args: argparse.Namespace) -> int:
    from lambdalake.stack.platform import Platform

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
    return 0 if all(r.running for r in rows) else 3


def cmd_demo(settings: Settings, args: argparse.Namespace) -> int:
    from deltalake import DeltaTable

    from lambdalake.orchestration.airflow_api import AirflowClient
    from lambdalake.smoke import SMOKE_TABLE
    from lambdalake.stack.airflow import Airflow

    af = settings.airflow
    client = AirflowClient(af.base_url, af.admin_user, Airflow(settings).admin_password)
    client.wait_for_dag(DEMO_DAG)
    client.unpause(DEMO_DAG)
    run_id = client.trigger(DEMO_DAG, {"events": args.events})
    print(f"triggered {DEMO_DAG} run {run_id} ({args.events} events); waiting ...")
    state = client.wait_for_run(DEMO_DAG, run_id)
    for task, task_state in client.task_states(DEMO_DAG, run_id).items():
        print(f"  {task:<20} {task_state}")
    if state != "success":
        print(f"{DEMO_DAG} {state}: see the task logs in {af.base_url}/dags/{DEMO_DAG}")
        return 1
    table = DeltaTable(settings.table_path(SMOKE_TABLE))
    rows = table.to_pyarrow_dataset().count_rows()
    print(f"read back without Spark: {rows} rows in {SMOKE_TABLE} (Delta version {table.version()})")
    print(f"Airflow UI: {af.base_url}/dags/{DEMO_DAG}")
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


def cmd_settings(_settings: Settings, _args: argparse.Namespace) -> int:
    print("| variable | default | meaning |\n| --- | --- | --- |")
    for name, default, description in documented_variables():
        print(f"| `{name}` | `{default}` | {description} |")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lambdalake", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("setup", help="resolve JVM jars, create state dirs").set_defaults(run=cmd_setup)
    commands.add_parser("up", help="start the local stack").set_defaults(run=cmd_up)
    commands.add_parser("down", help="stop the local stack").set_defaults(run=cmd_down)
    commands.add_parser("clean", help="stop, then delete all local state").set_defaults(
        run=cmd_clean
    )
    status = commands.add_parser("status", help="processes, memory, health")
    status.add_argument("--json", action="store_true")
    status.set_defaults(run=cmd_status)
    demo = commands.add_parser("demo", help="run the main job through Airflow")
    demo.add_argument("--events", type=int, default=1000)
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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.run(get_settings(), args))
    except Exception as error:  # noqa: BLE001 - the CLI reports, the traceback is noise
        from lambdalake.stack.process import StackError

        if isinstance(error, StackError):
            print(f"lambdalake {args.command}: {error}", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
