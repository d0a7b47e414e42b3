"""Airflow's LocalExecutor with warm workers: the batch steps' libraries are imported once.

A LocalExecutor worker forks a task process per task (Linux), and a Spark step forks again
from the task (``orchestration.spark_jobs``). Importing Great Expectations, pandas and the
Spark Connect client costs about 4 s of CPU per process, which on the Connect path was most
of a gate step and a third of a backfill's CPU. This executor imports them in the scheduler
before it forks its workers, so every task and every step starts with them loaded (the pages
are shared copy-on-write). Nothing else changes: no module here opens a connection, reads
settings or starts a thread at import. A new version of one of these libraries needs a
scheduler restart, as any library Airflow has loaded does.

Selected by ``AIRFLOW__CORE__EXECUTOR=lambdalake.orchestration.executor.WarmLocalExecutor``
(the stack and ``docker-compose.yml`` set it).
"""

from __future__ import annotations

import importlib
import logging
import multiprocessing

from airflow.executors.local_executor import LocalExecutor

WARM_MODULES = (
    "lambdalake.quality",  # first: it turns GX's analytics off before GX is imported
    "great_expectations",
    "pandas",
    "pyarrow",
    "deltalake",
    "duckdb",  # the gates' derived columns, serving maintenance
    "pyspark.sql.connect.session",
    "pyspark.sql.functions",
)
"""The third-party libraries the Spark steps (``spark_jobs/``) and the serving task import.
The platform's own modules are not among them (0.4 s; ``lambdalake.quality`` is only its
package marker): a change to ``include/`` takes effect in the next task without restarting
the scheduler."""


def import_warm_modules() -> None:
    # GX logs a line per API it registers at import; the scheduler's log does not need them
    logging.getLogger("great_expectations._docs_decorators").setLevel(logging.WARNING)
    for module in WARM_MODULES:
        importlib.import_module(module)


class WarmLocalExecutor(LocalExecutor):
    """LocalExecutor whose workers are forked after ``WARM_MODULES`` were imported."""

    def start(self) -> None:
        if multiprocessing.get_start_method() == "fork":  # spawned workers would not inherit
            import_warm_modules()
        super().start()
