import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from lambdalake.stack.process import ManagedProcess, StackError
from tests.support.settings_factory import MakeSettings

SLEEPER = [sys.executable, "-c", "import subprocess, sys, time; "
           "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); time.sleep(60)"]


def exited(process: psutil.Process) -> bool:
    """Gone, or a zombie its parent (init, for a detached one) has yet to reap."""
    try:
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


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
    assert all(exited(p) for p in members)
    assert process.pid() is None
    assert process.stop() is False


def test_stopping_a_process_another_process_started_does_not_wait_for_its_reaping(
    tmp_path: Path,
) -> None:
    """`lambdalake down` stopping a stack that a still-running process started (a test's
    own stack): what it stops stays a zombie until that parent reaps it, and stop does not
    wait out its timeout for a process that has exited."""
    run_dir = tmp_path / "run"
    starter = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from pathlib import Path; "
         "from lambdalake.stack.process import ManagedProcess; "
         "ManagedProcess('child', Path(sys.argv[1])).start("
         "[sys.executable, '-c', 'import time; time.sleep(60)']); "
         "print('started', flush=True); time.sleep(60)", str(run_dir)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert starter.stdout is not None and starter.stdout.readline() == "started\n"
        process = ManagedProcess("child", run_dir)
        child = psutil.Process(process.pid())
        began = time.monotonic()
        assert process.stop(timeout=60, root_first=True) is True
        assert time.monotonic() - began < 15  # it exited at once; the timeout is 60 s
        assert child.status() == psutil.STATUS_ZOMBIE and process.pid() is None
    finally:
        starter.kill()
        starter.wait()


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
    """A worker the stack forked (it carries the stack's tag, no pid file names it) is
    stopped; a process of another stack, one that only names the state dir (a log viewer,
    a shell in it) and the caller's own children are left alone."""
    import os
    import subprocess

    from lambdalake.operations.platform import Platform
    from lambdalake.stack.process import STACK_TAG

    state = tmp_path / "state"
    state.mkdir()
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]

    def detached(*args: str, **env: str) -> psutil.Process:  # parent: init, not this test
        launcher = subprocess.run(
            [sys.executable, "-c", "import os, subprocess, sys; print(subprocess.Popen("
             "sys.argv[1:], start_new_session=True, stdout=subprocess.DEVNULL, "
             "stderr=subprocess.DEVNULL, env={**os.environ, **eval(os.environ['EXTRA'])}"
             ").pid)", *sleeper, *args],
            capture_output=True, text=True, check=True, env={"EXTRA": repr(env)})
        return psutil.Process(int(launcher.stdout))

    forked_worker = detached(**{STACK_TAG: str(state.resolve())})
    other_stack = detached(**{STACK_TAG: str((state / "test").resolve())})
    log_viewer = detached(f"{state}/logs/ingest.log", PWD=str(state / "logs"))
    own_child = subprocess.Popen(sleeper, env={**os.environ, STACK_TAG: str(state.resolve())})
    try:
        platform = Platform(make_settings(state_dir=state))
        platform.components = []
        expected = [f"straggler pid {forked_worker.pid} ({forked_worker.name()})"]
        assert platform.down() == expected
        assert exited(forked_worker)
        assert other_stack.is_running() and log_viewer.is_running()
        assert own_child.poll() is None  # tagged, but the caller's own child
    finally:
        for process in (other_stack, log_viewer):
            process.kill()
        own_child.kill()


def test_every_process_a_stack_starts_carries_its_tag(tmp_path: Path) -> None:
    from lambdalake.stack.process import STACK_TAG

    process = ManagedProcess("tagged", tmp_path / "state" / "run")
    command = [sys.executable, "-c", "import time; time.sleep(30)"]
    started = psutil.Process(process.start(command))
    try:
        deadline = time.monotonic() + 10
        while started.cmdline() != command:  # until exec: before it, the child has our env
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert started.environ()[STACK_TAG] == str((tmp_path / "state").resolve())
    finally:
        process.stop()
