"""The one warning Airflow's own code wrote at the head of every task log is filtered in
the stack's Airflow processes, and nothing else is."""

import os
import subprocess
import sys

import pytest

from lambdalake.settings import Settings
from lambdalake.stack.airflow import Airflow

IMPORT_THE_SENSOR = "import airflow.providers.standard.sensors.python"  # what @task.sensor loads


def output(env: dict[str, str]) -> str:
    result = subprocess.run([sys.executable, "-c", IMPORT_THE_SENSOR], capture_output=True,
                            text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout + result.stderr


def test_airflows_processes_do_not_log_the_providers_deprecation(settings: Settings) -> None:
    bare = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    assert "determine_kwargs` attribute is deprecated" in output(bare)  # what it filters
    assert "deprecated" not in output({**bare, "PYTHONWARNINGS":
                                       Airflow(settings).environment()["PYTHONWARNINGS"]})


def test_a_warning_filter_of_the_operators_is_kept(settings: Settings,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONWARNINGS", "error::ResourceWarning")
    kept, ours = Airflow(settings).environment()["PYTHONWARNINGS"].split(",")
    assert kept == "error::ResourceWarning" and ours.startswith("ignore:The `airflow.utils")
