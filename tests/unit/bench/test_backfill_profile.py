"""The backfill profile names each process by its role, from its command line."""

from __future__ import annotations

import os
from dataclasses import dataclass

import pytest

from bench.diagnostics.backfill_profile import role


@dataclass
class FakeProcess:
    command: list[str]
    parent_command: list[str] | None = None
    pid: int = 0

    def cmdline(self) -> list[str]:
        return self.command

    def parent(self) -> FakeProcess:
        return FakeProcess(self.parent_command or [])


@pytest.mark.parametrize(("process", "expected"), [
    (FakeProcess(["python", "/r/spark_jobs/validate.py", "--layer", "bronze", "--start", "x"]),
     "step validate bronze"),
    (FakeProcess(["python /r/spark_jobs/batch_views.py stage --start x"]),  # one title
     "step batch_views"),
    (FakeProcess(["airflow worker -- 0193-ab"]), "airflow workers and task processes"),
    (FakeProcess(["airflow worker -- LocalExecutor: <idle>"]),
     "airflow workers and task processes"),
    (FakeProcess(["java", "-cp", "x", "org.apache.spark.deploy.SparkSubmit", "--class",
                  "org.apache.spark.sql.connect.service.SparkConnectServer"]),
     "spark-connect server"),
    (FakeProcess(["python", "-B", "-c", "from multiprocessing.spawn import spawn_main"],
                 ["python", "-m", "uvicorn", "lambdalake.serving.api:app"]),
     "serving API, spawned workers"),
    (FakeProcess(["java", "-cp", "x", "org.apache.spark.deploy.SparkSubmit", "pyspark-shell"],
                 ["python", "/r/spark_jobs/ingest.py"]),
     "step ingest, its JVM"),
    (FakeProcess(["bash"]), "other"),
    (FakeProcess(["python", "-m", "bench.diagnostics.backfill_profile"], pid=os.getpid()),
     "this diagnostic's sampler"),
])
def test_each_process_gets_its_role(process: FakeProcess, expected: str) -> None:
    assert role(process) == expected  # type: ignore[arg-type]
