"""Launching the Spark entry points in ``spark_jobs/`` as child processes.

An Airflow task (or the CLI) runs ``python spark_jobs/<job>.py <args>``: a Spark driver in
client mode whose SparkSession comes from ``lambdalake.spark.get_spark``, so the master
setting decides where executors run (in-process for ``local[*]``, on a cluster for
``spark://…``), or a thin Spark Connect client (``lambdalake.spark.task_session``) of the
server that ``orchestration.spark_connect.as_airflow_task`` names. The driver's output
streams into the caller's log line by line, and a non-zero exit fails the caller.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from lambdalake.orchestration.spark_connect import as_airflow_task
from lambdalake.settings import PROJECT_ROOT, get_settings

SPARK_JOBS_DIR = PROJECT_ROOT / "spark_jobs"


class SparkJobFailed(RuntimeError):
    """A Spark entry point exited with a non-zero status."""


def job_path(job: str) -> Path:
    path = SPARK_JOBS_DIR / f"{job}.py"
    if not path.is_file():
        known = sorted(p.stem for p in SPARK_JOBS_DIR.glob("*.py") if not p.stem.startswith("_"))
        raise ValueError(f"unknown Spark job {job!r}; known jobs: {', '.join(known)}")
    return path


def run_spark_job(
    job: str, args: Sequence[str] = (), echo: Callable[[str], None] = print
) -> list[str]:
    """Run one Spark entry point to completion; return its output lines."""
    command = [sys.executable, str(job_path(job)), *args]
    settings = get_settings()
    in_airflow = as_airflow_task(settings)
    environment = dict(os.environ)
    if in_airflow is not settings:  # the Airflow connection names the server
        environment["LAMBDALAKE_SPARK__CONNECT_URL"] = in_airflow.spark.connect_url
    lines: list[str] = []
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=PROJECT_ROOT,
        env=environment,
    ) as process:
        assert process.stdout is not None
        for line in process.stdout:
            line = line.rstrip("\n")
            lines.append(line)
            echo(line)
    if process.returncode != 0:
        raise SparkJobFailed(f"Spark job {job!r} exited with {process.returncode}")
    return lines
