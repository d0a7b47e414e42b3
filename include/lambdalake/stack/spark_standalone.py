"""A Spark standalone cluster (one master, one worker) on loopback, from the pyspark install.

Jobs reach it by setting ``LAMBDALAKE_SPARK__MASTER`` to ``spark_master_url``; the same
entry points then run their executors in the worker instead of in the driver process,
which is how the platform moves to a real cluster without code changes.
"""

from __future__ import annotations

from pathlib import Path

from lambdalake.settings import Settings
from lambdalake.stack.process import ManagedProcess, port_open


def spark_class_command() -> list[str]:
    import pyspark

    return [str(Path(pyspark.__file__).parent / "bin" / "spark-class")]


class SparkStandalone:
    """Start and stop a loopback master and one worker."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        run_dir = settings.state_dir / "run"
        self.master = ManagedProcess("spark-master", run_dir)
        self.worker = ManagedProcess("spark-worker", run_dir)

    @property
    def master_url(self) -> str:
        return self.settings.spark.standalone_master_url

    def _env(self) -> dict[str, str]:
        import os

        spark = self.settings.spark
        work = self.settings.state_dir / "spark-standalone"
        work.mkdir(parents=True, exist_ok=True)
        return {
            **os.environ,
            "SPARK_LOCAL_IP": spark.driver_host,
            "SPARK_LOG_DIR": str(work / "logs"),
            "SPARK_WORKER_DIR": str(work / "work"),
            "SPARK_NO_DAEMONIZE": "1",
        }

    def start(self, timeout: float = 60.0) -> None:
        spark = self.settings.spark
        host = spark.driver_host
        self.master.start(
            [*spark_class_command(), "org.apache.spark.deploy.master.Master",
             "--host", host, "--port", str(spark.standalone_port),
             "--webui-port", str(spark.standalone_ui_port)],
            env=self._env(),
        )
        self.master.wait_until(
            lambda: port_open(host, spark.standalone_port), timeout, "master port open"
        )
        self.worker.start(
            [*spark_class_command(), "org.apache.spark.deploy.worker.Worker", self.master_url,
             "--host", host, "--cores", str(spark.standalone_worker_cores),
             "--memory", spark.standalone_worker_memory, "--webui-port", "0"],
            env=self._env(),
        )
        self.worker.wait_until(
            lambda: "Successfully registered with master" in self.worker.log_tail(200),
            timeout,
            "worker registered with the master",
        )

    def stop(self) -> None:
        self.worker.stop()
        self.master.stop()
