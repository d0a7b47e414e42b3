"""Launching the Spark entry points in ``spark_jobs/`` as child processes.

An Airflow task (or the CLI) runs ``spark_jobs/<job>.py <args>`` in a child process: a Spark
driver in client mode whose SparkSession comes from ``lambdalake.spark.get_spark``, so the
master setting decides where executors run (in-process for ``local[*]``, on a cluster for
``spark://…``), or a thin Spark Connect client (``lambdalake.spark.task_session``) of the
server that ``orchestration.spark_connect.as_airflow_task`` names. The child's output
streams into the caller's log line by line, and a non-zero exit fails the caller.

On Linux the child is forked and runs the script as ``__main__`` without a new interpreter,
so it starts with whatever the caller had imported: under ``WarmLocalExecutor``
(``orchestration.executor``) that is Great Expectations and the Spark Connect client, about
4 s of CPU a step no longer pays. Its process title is the command line it stands for
(``python spark_jobs/<job>.py <args>``), so ``ps`` and ``kill`` find it as before. Elsewhere
(fork without exec is unsafe on macOS) the child execs a fresh interpreter. A task must
not use delta-rs before it starts a step: delta-rs refuses to run in a process forked after
its runtime started (no task does; each reads the lake after its steps, or not at all).
"""

from __future__ import annotations

import atexit
import io
import logging
import os
import runpy
import signal
import sys
import time
import traceback
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import NoReturn

from lambdalake.orchestration.spark_connect import as_airflow_task
from lambdalake.settings import get_settings

RUN_IN_FORK = sys.platform == "linux"
_CALLERS_STREAMS: list[object] = []


DATA_REJECTED_EXIT = 3
"""The exit status of a step that ran and found the data failing its checks (a gate of
``spark_jobs/validate.py``): a retry would read the same data and fail the same way."""


class SparkJobFailed(RuntimeError):
    """A Spark entry point exited with a non-zero status (``exit_code``)."""

    def __init__(self, job: str, exit_code: int) -> None:
        super().__init__(f"Spark job {job!r} exited with {exit_code}")
        self.exit_code = exit_code


def job_path(job: str) -> Path:
    """The entry point ``spark_jobs/<job>.py`` of the project (``LAMBDALAKE_PROJECT_DIR``)."""
    jobs = get_settings().project_path("spark_jobs")
    path = jobs / f"{job}.py"
    if not path.is_file():
        known = sorted(p.stem for p in jobs.glob("*.py") if not p.stem.startswith("_"))
        raise ValueError(f"unknown Spark job {job!r}; known jobs: {', '.join(known)}")
    return path


def job_environment() -> dict[str, str]:
    """The caller's environment, plus the Connect server an Airflow connection names."""
    settings = get_settings()
    in_airflow = as_airflow_task(settings)
    environment = dict(os.environ)
    if in_airflow is not settings:  # the Airflow connection names the server
        environment["LAMBDALAKE_SPARK__CONNECT_URL"] = in_airflow.spark.connect_url
    return environment


def run_spark_job(
    job: str, args: Sequence[str] = (), echo: Callable[[str], None] = print
) -> list[str]:
    """Run one Spark entry point to completion in a child process; return its output lines."""
    command = [sys.executable, str(job_path(job)), *args]
    environment = job_environment()
    read_end, write_end = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        _child(command, environment, write_end)
    os.close(write_end)
    lines: list[str] = []
    try:
        with open(read_end, encoding="utf-8", errors="replace") as output:
            for line in output:
                line = line.rstrip("\n")
                lines.append(line)
                echo(line)
    except BaseException:  # the task timed out or was told to stop: so is its step
        _stop(pid)
        raise
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SparkJobFailed(job, code)
    return lines


def _stop(pid: int, grace: float = 10.0) -> None:
    """SIGTERM the step, SIGKILL it after ``grace`` seconds, and reap it."""
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if os.waitpid(pid, os.WNOHANG) != (0, 0):
            return
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)


def _child(command: list[str], environment: Mapping[str, str], output: int) -> NoReturn:
    """The forked child: output to the pipe, nothing else of the caller's (its descriptors,
    signal, warning and exit handlers, log handlers), then the script as ``__main__`` (or
    exec on macOS), and its exit handlers at the end, as an interpreter would."""
    atexit._clear()  # the caller's (Airflow's) are not the step's
    code = 1
    try:
        os.dup2(output, 1)
        os.dup2(output, 2)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        # the caller's stream objects stay referenced: collecting one (Airflow's own, say)
        # would close the descriptor it wraps, which is now the pipe
        _CALLERS_STREAMS.extend([sys.stdin, sys.stdout, sys.stderr])
        sys.stdout = io.TextIOWrapper(open(1, "wb", closefd=False), line_buffering=True)
        sys.stderr = io.TextIOWrapper(open(2, "wb", closefd=False), line_buffering=True)
        sys.stdin = open(0, closefd=False)
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))
        os.chdir(get_settings().project_path())  # the caller's settings, as job_path's
        if not RUN_IN_FORK:
            os.execve(sys.executable, command, environment)
        _set_process_title(command)  # before the environment changes: it moves it
        signal.signal(signal.SIGINT, signal.default_int_handler)  # KeyboardInterrupt: the
        for signum in (signal.SIGTERM, signal.SIGHUP):  # step's finally blocks still run
            signal.signal(signum, signal.SIG_DFL)
        os.environ.update(environment)
        get_settings.cache_clear()  # the caller's were read before the environment changed
        _log_to_stderr()
        sys.argv = command[1:]
        runpy.run_path(command[1], run_name="__main__")
        code = 0
    except SystemExit as exit_:  # sys.exit(n), argparse's errors
        code = _exit_status(exit_.code)
    except BaseException:  # noqa: BLE001 - reported like an interpreter would, then the exit
        traceback.print_exc()
    finally:
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001 - the pipe may be gone with the caller
                pass
        os._exit(code)


def _exit_status(code: object) -> int:
    """What an interpreter exits with for ``sys.exit(code)``."""
    if code is None or isinstance(code, int):
        return code or 0
    print(code, file=sys.stderr)
    return 1


def _log_to_stderr() -> None:
    """Drop the caller's log, warning and exception handlers (Airflow's send records over
    its own channel to the task supervisor, whose descriptor the child closed): the child
    logs to its stderr, as a fresh interpreter would."""
    warnings.showwarning = warnings._showwarning_orig  # type: ignore[attr-defined]
    sys.excepthook = sys.__excepthook__
    if "structlog" in sys.modules:
        sys.modules["structlog"].reset_defaults()
    for logger in [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]:
        if isinstance(logger, logging.Logger):
            logger.handlers.clear()
            logger.propagate = True
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, force=True)


def _set_process_title(command: list[str]) -> None:
    try:
        from setproctitle import setproctitle
    except ImportError:  # it comes with Airflow; without it, ps shows the caller
        return
    setproctitle(" ".join(command))
