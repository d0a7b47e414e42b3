"""The watchdog starts the services that exited again, once their database answers, and
keeps trying when a start fails; with no interval there is no watchdog."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

from lambdalake.operations.platform import Platform
from lambdalake.stack.process import ManagedProcess, StackError
from lambdalake.stack.watchdog import restart_exited, watch
from tests.support.settings_factory import MakeSettings

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]


class Sleepers:
    """Services of sleeping processes; ``start`` starts those not running (as Airflow's)
    and fails the first ``failures`` times."""

    label = "sleepers"

    def __init__(self, run_dir: Path, names: list[str], failures: int = 0) -> None:
        self.processes = [ManagedProcess(name, run_dir) for name in names]
        self.failures = failures
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        if self.starts <= self.failures:
            raise StackError("the scheduler is not running; see its log")
        for process in self.processes:
            process.start(SLEEPER)

    def stop(self) -> None:
        for process in self.processes:
            process.stop(timeout=5)


class Database:
    def __init__(self, answers: bool) -> None:
        self.answers = answers

    def ready(self) -> bool:
        return self.answers


@pytest.fixture
def services(tmp_path: Path):  # type: ignore[no-untyped-def]
    sleepers = Sleepers(tmp_path / "run", ["airflow-scheduler", "airflow-triggerer"])
    sleepers.start()
    yield sleepers
    sleepers.stop()


def test_only_the_exited_services_start_again_once_the_database_answers(
    services: Sleepers,
) -> None:
    scheduler, triggerer = services.processes
    kept = triggerer.pid()
    assert restart_exited(services, Database(True)) == []  # nothing exited
    scheduler.kill()
    assert restart_exited(services, Database(False)) == []  # the database is not back yet
    assert scheduler.pid() is None
    assert restart_exited(services, Database(True)) == ["airflow-scheduler"]
    assert scheduler.pid() is not None and triggerer.pid() == kept


def test_a_start_that_fails_is_tried_again_the_next_round(tmp_path: Path) -> None:
    services = Sleepers(tmp_path / "run", ["airflow-scheduler"], failures=2)
    stopped = threading.Event()
    watcher = threading.Thread(target=watch, args=(services, Database(True), 0.05, stopped))
    watcher.start()
    try:
        for _ in range(200):
            if services.processes[0].pid() is not None:
                break
            stopped.wait(0.05)
        assert services.processes[0].pid() is not None and services.starts == 3
    finally:
        stopped.set()
        watcher.join()
        services.stop()


def test_the_watchdog_starts_last_and_none_runs_without_an_interval(
    make_settings: MakeSettings,
) -> None:
    platform = Platform(make_settings())
    assert platform.components[-1] is platform.watchdog  # after Airflow; `down` stops it first
    assert [p.name for p in platform.watchdog.processes] == ["watchdog"]
    off = Platform(make_settings(airflow={"watch_every_seconds": 0}))
    assert off.watchdog.processes == []
    assert off.watchdog.start() == "no watchdog (airflow.watch_every_seconds is 0)"
