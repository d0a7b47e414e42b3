import sys
import time
from pathlib import Path

import psutil
import pytest

from lambdalake.stack.process import ManagedProcess, StackError
from tests.support.settings_factory import MakeSettings

SLEEPER = [sys.executable, "-c", "import subprocess, sys, time; "
           "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); time.sleep(60)"]


def test_start_is_idempotent_and_stop_takes_the_whole_group(tmp_path: Path) -> None:
    process = ManagedProcess("sleeper", tmp_path / "run")
    pid = process.start(SLEEPER)
    assert process.start(SLEEPER) == pid  # already running: not started twice
    deadline = time.monotonic() + 10
    while len(process.members()) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    members = process.members()
    assert len(members) == 2
    assert process.stop(timeout=5) is True
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in members)
    assert process.pid() is None
    assert process.stop() is False


def test_a_lower_priority_reaches_the_process_and_what_it_starts_later(tmp_path: Path) -> None:
    process = ManagedProcess("background", tmp_path / "run")
    pid = process.start([sys.executable, "-c", "import subprocess, sys, time; time.sleep(0.5); "
                         "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']);"
                         " time.sleep(60)"], niceness=7)
    try:
        deadline = time.monotonic() + 10
        while len(process.members()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [member.nice() for member in process.members()] == [7, 7]
        autogroup = Path(f"/proc/{pid}/autogroup")
        if autogroup.exists():  # Linux shares CPU out per session: the session's share too
            assert autogroup.read_text().split()[-1] == "7"
    finally:
        process.stop(timeout=5)


def test_a_reused_pid_is_not_mistaken_for_ours(tmp_path: Path) -> None:
    process = ManagedProcess("ghost", tmp_path / "run")
    process.run_dir.mkdir(parents=True)
    me = psutil.Process()
    process.pid_file.write_text(f'{{"pid": {me.pid}, "create_time": {me.create_time() - 100}}}')
    assert process.pid() is None


def test_a_process_that_dies_while_starting_names_its_log(tmp_path: Path) -> None:
    process = ManagedProcess("crasher", tmp_path / "run")
    process.start([sys.executable, "-c", "print('boom: bad config'); raise SystemExit(3)"])
    with pytest.raises(StackError, match=r"crasher exited while starting; see .*crasher\.log") as err:
        process.wait_until(lambda: False, timeout=10, what="never")
    assert "boom: bad config" in str(err.value)


def test_a_process_that_never_gets_healthy_times_out(tmp_path: Path) -> None:
    process = ManagedProcess("slow", tmp_path / "run")
    process.start([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        with pytest.raises(StackError, match="did not become healthy"):
            process.wait_until(lambda: False, timeout=1, what="port open")
    finally:
        process.stop(timeout=5)


def test_root_first_lets_the_root_shut_down_its_children_itself(tmp_path: Path) -> None:
    marker = tmp_path / "clean-exit"
    script = (
        "import signal, subprocess, sys, time, pathlib\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "def stop(*_):\n"
        "    child.terminate(); child.wait()\n"
        f"    pathlib.Path({str(marker)!r}).write_text('ok'); sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, stop)\n"
        "time.sleep(60)\n"
    )
    process = ManagedProcess("graceful", tmp_path / "run")
    process.start([sys.executable, "-c", script])
    deadline = time.monotonic() + 10
    while len(process.members()) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert process.stop(timeout=10, root_first=True)
    assert marker.read_text() == "ok"  # its own handler ran, with its child still there
    assert process.pid() is None


def test_stop_reaps_a_group_whose_root_already_died(tmp_path: Path) -> None:
    script = ("import subprocess, sys\n"
              "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n")
    process = ManagedProcess("orphaning", tmp_path / "run")
    process.start([sys.executable, "-c", script])  # the root exits, its child lives on
    deadline = time.monotonic() + 10
    while (process.pid() is not None or not process.orphans()) and time.monotonic() < deadline:
        time.sleep(0.05)
    orphans = process.orphans()
    assert len(orphans) == 1
    assert process.stop(timeout=5) is False  # the root was gone
    assert not orphans[0].is_running() or orphans[0].status() == psutil.STATUS_ZOMBIE


def test_down_stops_what_no_pid_file_names_and_only_that(make_settings: MakeSettings,
                                                          tmp_path: Path) -> None:
    """A stack's process without a pid file (a worker forked while the stack stopped) is
    found by the state dir it names and stopped; a process of a stack nested in it, one
    that reads only the shared jars, and the caller's own children are left alone."""
    import subprocess

    from lambdalake.operations.platform import Platform

    state = tmp_path / "state"
    (state / "test" / "run").mkdir(parents=True)  # a test stack's state dir inside this one
    (state / "jars").mkdir()
    (state / "airflow").mkdir()
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]

    def detached(*args: str, **env: str) -> psutil.Process:  # parent: init, not this test
        launcher = subprocess.run(
            [sys.executable, "-c", "import os, subprocess, sys; print(subprocess.Popen("
             "sys.argv[1:], start_new_session=True, stdout=subprocess.DEVNULL, "
             "stderr=subprocess.DEVNULL, env={**os.environ, **eval(os.environ['EXTRA'])}"
             ").pid)", *sleeper, *args],
            capture_output=True, text=True, check=True, env={"EXTRA": repr(env)})
        return psutil.Process(int(launcher.stdout))

    by_name = detached(f"--log={state}/logs/worker.log")
    by_environment = detached(AIRFLOW_HOME=str(state / "airflow"))
    nested_stack = detached(f"--log={state}/test/logs/kafka.log")
    shared_jars = detached(f"-cp={state}/jars/kafka/*")
    sibling = detached(f"--log={tmp_path}/state-two/logs/x.log")
    own_child = subprocess.Popen([*sleeper, f"--log={state}/logs/mine.log"])
    try:
        platform = Platform(make_settings(state_dir=state, jars_dir=state / "jars"))
        platform.components = []
        expected = sorted(f"straggler pid {p.pid} ({p.name()})" for p in (by_name, by_environment))
        assert sorted(platform.down()) == expected
        assert not by_name.is_running() and not by_environment.is_running()
        assert all(p.is_running() for p in (nested_stack, shared_jars, sibling))
        assert own_child.poll() is None
    finally:
        for process in (nested_stack, shared_jars, sibling):
            process.kill()
        own_child.kill()
