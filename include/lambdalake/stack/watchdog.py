"""The local stack's watchdog: it starts Airflow's services again when they exit.

Airflow's scheduler, dag-processor and triggerer exit when their database goes away (a
PostgreSQL restart, a lost connection): Airflow leaves starting them again to a process
manager (compose's ``restart: unless-stopped``, systemd, Kubernetes). On the local stack
this small process is that manager for Airflow: every ``airflow.watch_every_seconds`` it
looks for an Airflow service that is not running and, once PostgreSQL answers, starts the
missing ones (``Airflow.start`` starts only those) and logs what it started. The streams
are not its business: the DAG ``lambdalake_speed_supervisor`` keeps ingest and the speed
layer running, and it needs the scheduler this brings back.

It runs with the stack's settings and every credential Airflow's services get from ``up``,
so the services it starts are the ones ``up`` would start.
"""

from __future__ import annotations

import logging
import sys
import threading
from pathlib import Path
from typing import Protocol

from lambdalake.stack.process import OneProcessComponent, StackComponent, StackError

log = logging.getLogger(__name__)


class Watchdog(OneProcessComponent):
    """The watchdog's process (``lambdalake watchdog run``); none with a zero interval."""

    label = "watchdog (starts Airflow's services again)"
    process_name = "watchdog"

    @property
    def runs_here(self) -> bool:
        return self.settings.airflow.watch_every_seconds > 0

    def start(self) -> str:
        if not self.runs_here:
            return "no watchdog (airflow.watch_every_seconds is 0)"
        running = self.process.pid()
        # every credential: the services it starts get what `up` gives Airflow's
        pid = running or self.process.start(
            [str(Path(sys.executable).with_name("lambdalake")), "watchdog", "run"],
            env=self.settings.child_environment(secrets=True))
        return f"watchdog {'running' if running else 'started'} (pid {pid})"

    def stop(self) -> bool:
        return self.process.stop(timeout=30)


class Database(Protocol):
    """What the services need first (``Postgres``)."""

    def ready(self) -> bool: ...


def restart_exited(services: StackComponent, database: Database) -> list[str]:
    """Start the processes of ``services`` (``Airflow``, whose ``start`` starts those not
    running) that are not running, once the database answers; return their names (none
    started: nothing was missing, or the database does not answer yet)."""
    missing = [process.name for process in services.processes if process.pid() is None]
    if not missing or not database.ready():
        return []
    services.start()
    return missing


def watch(services: StackComponent, database: Database, every_seconds: float,
          stopped: threading.Event) -> None:
    """``restart_exited`` every ``every_seconds`` until ``stopped``; a start that fails is
    logged and tried again the next round."""
    log.info("watching %s every %g s", ", ".join(p.name for p in services.processes),
             every_seconds)
    while not stopped.wait(every_seconds):
        try:
            started = restart_exited(services, database)
        except (StackError, OSError) as error:
            log.warning("starting exited services again failed (trying again): %s", error)
            continue
        if started:
            log.warning("started again what had exited: %s", ", ".join(started))
