"""Spark steps run in a forked child: its output and exit status come back to the caller,
and the child is visible as the command it stands for."""

from __future__ import annotations

import io
import os
import signal
import socket
import sys
import threading
import time

import psutil
import pytest

from lambdalake.orchestration.spark_jobs import SparkJobFailed, job_path, run_spark_job


def test_a_step_output_comes_back_line_by_line() -> None:
    echoed: list[str] = []
    lines = run_spark_job("validate", ["--help"], echo=echoed.append)
    assert lines == echoed
    assert lines[0].startswith("usage: validate.py")


def test_a_failing_step_fails_the_caller_with_its_exit_status() -> None:
    echoed: list[str] = []
    with pytest.raises(SparkJobFailed, match="exited with 2") as failed:
        run_spark_job("validate", ["--layer", "nope"], echo=echoed.append)
    assert failed.value.exit_code == 2
    assert any("invalid choice: 'nope'" in line for line in echoed)


def test_the_callers_own_stdout_object_does_not_close_the_childs_output(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Airflow's task process wraps descriptor 1 in a stream object of its own: replacing it
    in the child must not let it be collected, which would close the pipe under the job."""
    saved = os.dup(1)
    # referenced by sys.stdout alone, as Airflow's is; it closes descriptor 1 when collected
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(io.FileIO(1, "w", closefd=True)))
    try:
        lines = run_spark_job("validate", ["--help"], echo=lambda line: None)
    finally:
        sys.stdout.close()  # this process's descriptor 1, which is put back
        monkeypatch.undo()
        os.dup2(saved, 1)
        os.close(saved)
    assert lines[0].startswith("usage: validate.py")


def test_the_child_shows_the_command_it_stands_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """``ps`` (and the chaos tests) find a step by its script and run id. The step here
    waits two seconds for a Spark Connect server that is not there, then fails."""
    monkeypatch.setenv("LAMBDALAKE_SPARK__CONNECT_URL", f"sc://127.0.0.1:{free_port()}")
    monkeypatch.setenv("LAMBDALAKE_SPARK__CONNECT_WAIT_SECONDS", "2")
    seen: list[list[str]] = []

    def look() -> None:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not seen:
            for child in psutil.Process().children():
                words = " ".join(child.cmdline()).split()
                if any(w.endswith("spark_jobs/batch_views.py") for w in words):
                    seen.append(words)
            time.sleep(0.05)

    watcher = threading.Thread(target=look)
    watcher.start()
    echoed: list[str] = []
    with pytest.raises(SparkJobFailed):
        run_spark_job("batch_views", ["build", "--views", "funnel", "--run-id", "title-check"],
                      echo=echoed.append)
    watcher.join()
    assert any("SparkConnectUnavailable" in line for line in echoed), echoed
    assert seen and "title-check" in seen[0] and str(job_path("batch_views")) in seen[0]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_task_that_times_out_stops_its_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """Airflow's execution timeout raises in the task while it reads the step's output: the
    step is stopped and reaped, not left writing beside the retry."""
    monkeypatch.setenv("LAMBDALAKE_SPARK__CONNECT_URL", f"sc://127.0.0.1:{free_port()}")
    monkeypatch.setenv("LAMBDALAKE_SPARK__CONNECT_WAIT_SECONDS", "60")

    def time_out(signum: int, frame: object) -> None:
        raise TimeoutError("the task timed out")

    previous = signal.signal(signal.SIGALRM, time_out)
    signal.alarm(2)
    began = time.monotonic()
    try:
        with pytest.raises(TimeoutError):
            run_spark_job("batch_views", ["build", "--views", "funnel"], echo=lambda line: None)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert psutil.Process().children() == []
    assert time.monotonic() - began < 30
