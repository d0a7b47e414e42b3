"""The warm executor imports the steps' libraries before Airflow forks its workers."""

from __future__ import annotations

import subprocess
import sys

from lambdalake.orchestration.executor import WARM_MODULES, WarmLocalExecutor
from lambdalake.stack.airflow import EXECUTOR

CHECK = """
import sys
from airflow.executors.local_executor import LocalExecutor

loaded = {}
LocalExecutor.start = lambda self: loaded.update({m: m in sys.modules for m in WARM_MODULES})
from lambdalake.orchestration.executor import WARM_MODULES, WarmLocalExecutor

before = [m for m in WARM_MODULES if m in sys.modules and m != "lambdalake.quality"]
WarmLocalExecutor(parallelism=1).start()
print(before, sorted(m for m, ok in loaded.items() if not ok), len(loaded))
"""


def test_the_workers_are_forked_after_the_libraries_were_imported() -> None:
    """In a fresh interpreter: nothing of WARM_MODULES before ``start``, all of them by the
    time LocalExecutor's own ``start`` forks the workers."""
    result = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True,
                            check=True, timeout=120)
    assert result.stdout.strip().splitlines()[-1] == f"[] [] {len(WARM_MODULES)}"


def test_the_stack_runs_the_warm_executor() -> None:
    module, _, name = EXECUTOR.rpartition(".")
    assert (module, name) == (WarmLocalExecutor.__module__, WarmLocalExecutor.__name__)
