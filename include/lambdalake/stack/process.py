"""Long-running local processes, started and stopped by PID.

Each process of the local stack runs in its own session (process group), logs to one file
and is remembered by a small JSON pid file. ``stop`` signals the whole group, so children
(Airflow's worker processes, a JVM launched by a wrapper) go with it, and nothing that
``start`` did not start is ever touched.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import psutil

if TYPE_CHECKING:
    from lambdalake.settings import Settings


class StackError(RuntimeError):
    """A component of the local stack failed; the message names it and its log file."""


def lower_priority(pid: int, niceness: int) -> None:
    """Give a process just started (before it starts threads or children, which inherit
    it) the nice value ``niceness``, and its session too where Linux shares CPU time out
    per session (autogroup): there a process's own nice value only ranks it against its
    session's other processes, and every stack process has a session of its own. Where the
    session's share cannot be changed (no autogroup, or not permitted), the process's nice
    value is what there is."""
    niceness = max(niceness, os.getpriority(os.PRIO_PROCESS, pid))  # never raise it
    os.setpriority(os.PRIO_PROCESS, pid, niceness)
    try:
        Path(f"/proc/{pid}/autogroup").write_text(str(niceness))
    except OSError:  # no autogroup here, or not permitted
        pass


STACK_TAG = "LAMBDALAKE_STACK"
"""The environment variable every process a stack starts carries, and all it starts in turn
inherit (JVM children, forked workers): its state dir, which ``stragglers`` looks for."""


@dataclass(frozen=True)
class ManagedProcess:
    """One named process of the stack, with its pid file and log file under ``run_dir``."""

    name: str
    run_dir: Path

    @property
    def pid_file(self) -> Path:
        return self.run_dir / f"{self.name}.pid.json"

    @property
    def log_file(self) -> Path:
        return self.run_dir.parent / "logs" / f"{self.name}.log"

    def start(
        self,
        command: Sequence[str],
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        as_user: Mapping[str, Any] | None = None,
        niceness: int = 0,
    ) -> int:
        """Start ``command`` detached from this process, unless it is already running;
        ``niceness`` > 0 lowers its CPU priority (``lower_priority``)."""
        running = self.pid()
        if running is not None:
            return running
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        with self.log_file.open("ab") as log:
            log.write(f"\n=== {time.strftime('%Y-%m-%dT%H:%M:%S')} starting {self.name}\n".encode())
            log.flush()
            popen = subprocess.Popen(
                list(command),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**(env if env is not None else os.environ),
                     STACK_TAG: str(self.run_dir.parent.resolve())},
                cwd=cwd,
                start_new_session=True,
                **(as_user or {}),
            )
        if niceness:
            lower_priority(popen.pid, niceness)
        created = psutil.Process(popen.pid).create_time()
        self.pid_file.write_text(json.dumps({"pid": popen.pid, "create_time": created}))
        return popen.pid

    def pid(self) -> int | None:
        """The PID if the process we started is still alive (a reused PID does not count)."""
        try:
            record = json.loads(self.pid_file.read_text())
            process = psutil.Process(record["pid"])
            if abs(process.create_time() - record["create_time"]) > 0.01:
                return None
            if process.status() == psutil.STATUS_ZOMBIE:
                return None
            return int(record["pid"])
        except (FileNotFoundError, ValueError, KeyError, psutil.NoSuchProcess):
            return None

    def members(self) -> list[psutil.Process]:
        """The process and every descendant (for memory accounting and for stopping)."""
        pid = self.pid()
        if pid is None:
            return []
        try:
            root = psutil.Process(pid)
            return [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def orphans(self) -> list[psutil.Process]:
        """Processes still in the session we started after its root died (a JVM, say).

        ``start`` made the root a session leader, so its PID is their session id; Linux
        does not reuse a PID that is still a live session or group id.
        """
        try:
            recorded = json.loads(self.pid_file.read_text())["pid"]
        except (FileNotFoundError, ValueError, KeyError):
            return []
        found = []
        for process in psutil.process_iter():
            try:
                if process.pid != recorded and os.getsid(process.pid) == recorded:
                    found.append(process)
            except (psutil.NoSuchProcess, ProcessLookupError, PermissionError):
                continue
        return found

    def rss_bytes(self) -> int:
        total = 0
        for process in self.members():
            try:
                total += process.memory_info().rss
            except psutil.NoSuchProcess:
                pass
        return total

    def stop(self, timeout: float = 30.0, root_first: bool = False) -> bool:
        """SIGTERM the process group, then SIGKILL what is left; True if it was running.

        ``root_first`` gives the root process ``timeout`` seconds to shut down on its own
        (a Spark driver finishing its micro-batch needs its JVM child alive meanwhile)
        before the rest of the group is signalled.
        """
        members = self.members()
        if not members:
            orphans = self.orphans()
            for process in orphans:
                process.kill()
            wait_exited(orphans, timeout=10)
            self.pid_file.unlink(missing_ok=True)
            return False
        pgid = os.getpgid(members[0].pid)
        if root_first:
            try:
                members[0].send_signal(signal.SIGTERM)
            except psutil.NoSuchProcess:
                pass
            wait_exited(members[:1], timeout)
            members = [p for p in members if not _exited(p)]
            timeout = 10.0
        if members:
            _signal_group(pgid, members, signal.SIGTERM)
            alive = wait_exited(members, timeout)
            if alive:
                _signal_group(pgid, alive, signal.SIGKILL)
                wait_exited(alive, timeout=10)
        self.pid_file.unlink(missing_ok=True)
        return True

    def kill(self) -> None:
        """SIGKILL the process group at once (chaos tests: a crash, not a shutdown)."""
        members = self.members()
        if members:
            _signal_group(os.getpgid(members[0].pid), members, signal.SIGKILL)
            wait_exited(members, timeout=10)

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log yet)"

    def wait_until(self, healthy: Callable[[], bool], timeout: float, what: str) -> None:
        """Poll ``healthy`` until it holds; fail naming the component and its log file."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.pid() is None:
                raise StackError(
                    f"{self.name} exited while starting; see {self.log_file}:\n{self.log_tail()}"
                )
            try:
                if healthy():
                    return
            except Exception:  # noqa: BLE001 - any probe failure means "not yet"
                pass
            time.sleep(0.5)
        raise StackError(
            f"{self.name} did not become healthy ({what}) within {timeout:.0f}s; "
            f"see {self.log_file}:\n{self.log_tail()}"
        )


def stragglers(state_dir: Path) -> list[psutil.Process]:
    """Processes of the stack in ``state_dir`` that no pid file names any more (a worker
    forked while the stack stopped, a child whose parent died first): those whose
    environment carries the stack's tag (``STACK_TAG``) for exactly this state dir. A shell
    or a log viewer in the state dir, another stack's processes and this process with its
    ancestors and descendants are never among them."""
    tag = str(state_dir.resolve())
    own = psutil.Process()
    spared = {own.pid, *(p.pid for p in own.parents()),
              *(p.pid for p in own.children(recursive=True))}
    found = []
    for process in psutil.process_iter():
        if process.pid in spared:
            continue
        try:
            if process.environ().get(STACK_TAG) == tag:
                found.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def stop_processes(processes: Sequence[psutil.Process], timeout: float = 10.0) -> None:
    """SIGTERM ``processes``, then SIGKILL what is left after ``timeout`` seconds."""
    for process in processes:
        try:
            process.terminate()
        except psutil.NoSuchProcess:
            pass
    alive = wait_exited(processes, timeout)
    for process in alive:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            pass
    wait_exited(alive, timeout)


def _exited(process: psutil.Process) -> bool:
    """Whether ``process`` exited: reaped here if it is a child of this process, or gone,
    or a zombie (another process's child, which only its parent can reap: the stack a
    test started in its own process, stopped by `lambdalake down` from another)."""
    try:
        process.wait(timeout=0)
        return True
    except psutil.TimeoutExpired:
        try:
            return bool(process.status() == psutil.STATUS_ZOMBIE)
        except psutil.NoSuchProcess:
            return True
    except psutil.NoSuchProcess:
        return True


def wait_exited(processes: Sequence[psutil.Process], timeout: float) -> list[psutil.Process]:
    """Wait until every one of ``processes`` exited (``_exited``), at most ``timeout``
    seconds; those still running."""
    deadline = time.monotonic() + timeout
    alive = [process for process in processes if not _exited(process)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)
        alive = [process for process in alive if not _exited(process)]
    return alive


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    """Whether something accepts TCP connections on ``host:port``."""
    with socket.socket() as probe:
        probe.settimeout(timeout)
        return probe.connect_ex((host, port)) == 0


def _signal_group(pgid: int, members: Sequence[psutil.Process], sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass
    for process in members:  # children that left the group
        try:
            process.send_signal(sig)
        except psutil.NoSuchProcess:
            pass


def run_checked(
    command: Sequence[str],
    log_file: Path,
    env: Mapping[str, str] | None = None,
    as_user: Mapping[str, Any] | None = None,
) -> None:
    """Run a one-shot setup command, appending its output to ``log_file``; raise on failure."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with log_file.open("ab") as log:
        result = subprocess.run(
            list(command), stdout=log, stderr=subprocess.STDOUT, env=dict(env) if env else None,
            cwd="/" if as_user else None, **(as_user or {}),
        )
    if result.returncode != 0:
        tail = "\n".join(log_file.read_text(errors="replace").splitlines()[-20:])
        raise StackError(f"{command[0]} failed ({result.returncode}); see {log_file}:\n{tail}")


class StackComponent(Protocol):
    """One component of the local stack, as `make up`, `make down` and `make status` drive
    it: ``label`` names it in `up`'s progress, ``processes`` are those it runs here (none
    for a component that lives elsewhere, e.g. an external schema registry), ``start``
    returns once it is healthy and ``stop`` stops what it started."""

    label: str

    @property
    def processes(self) -> list[ManagedProcess]: ...

    def start(self) -> object: ...

    def stop(self) -> object: ...


class OneProcessComponent:
    """A stack component of one process, ``process_name`` under the state dir's ``run/``,
    which runs here unless ``runs_here`` says it lives elsewhere: ``StackComponent``'s
    ``processes`` for all of them."""

    label: str
    process_name: str

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.process = ManagedProcess(self.process_name, settings.state_dir / "run")

    @property
    def runs_here(self) -> bool:
        return True

    @property
    def processes(self) -> list[ManagedProcess]:
        return [self.process] if self.runs_here else []
