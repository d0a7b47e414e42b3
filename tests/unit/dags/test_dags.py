"""Every DAG file imports cleanly, parses fast, and pulls in nothing heavy at module level."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from lambdalake.settings import PROJECT_ROOT

DAGS = PROJECT_ROOT / "dags"
HEAVY = ("pyspark", "great_expectations", "confluent_kafka", "delta", "deltalake")

PROBE = f"HEAVY = {HEAVY!r}\n" + """
import json, pathlib, sys, time
from airflow.dag_processing.dagbag import DagBag
import airflow.sdk  # warm the SDK, so each file's time is its own
bag = DagBag(dag_folder=sys.argv[1], collect_dags=False)
cpu = {}
for path in sorted(pathlib.Path(sys.argv[1]).glob("*.py")):
    started = time.process_time()  # CPU time: other load on the machine does not count
    bag.process_file(str(path))
    cpu[str(path)] = time.process_time() - started
print(json.dumps({
    "errors": {k: str(v) for k, v in bag.import_errors.items()},
    "dags": sorted(bag.dag_ids),
    "cpu_seconds": cpu,
    "heavy": sorted(m for m in sys.modules if m.split(".")[0] in HEAVY),
    "batch_upstream": {task.task_id: sorted(task.upstream_task_ids)
                       for task in bag.dags["lambdalake_batch_views"].tasks},
    "batch_params": {name: {"default": param.value, "schema": param.schema}
                     for name, param in bag.dags["lambdalake_batch_views"].params.items()},
}))
"""


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """What a DagBag makes of the DAG files, in a fresh interpreter (one for the module)."""
    home = tmp_path_factory.mktemp("airflow-home")
    env = {**os.environ, "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
           "AIRFLOW__CORE__UNIT_TEST_MODE": "True"}
    result = subprocess.run(
        [sys.executable, "-c", PROBE, str(DAGS)], capture_output=True, text=True, env=env,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_dag_files_import_without_errors_fast_and_light(report: dict) -> None:
    assert report["errors"] == {}
    assert {"lambdalake_smoke", "lambdalake_serving"} <= set(report["dags"])
    assert len(report["cpu_seconds"]) == len(list(DAGS.glob("*.py")))
    slow = {f: d for f, d in report["cpu_seconds"].items() if d >= 1.0}
    assert slow == {}, f"DAG files must parse in under a second of CPU time: {slow}"
    assert report["heavy"] == [], "DAG files must not import Spark, GX, Kafka or Delta at module level"


def test_a_batch_run_computes_only_after_its_bronze_gate_and_publishes_after_its_view_gate(
    report: dict,
) -> None:
    assert report["batch_upstream"] == {
        "plan": [], "wait_for_bronze": ["plan"], "gate_bronze": ["plan", "wait_for_bronze"],
        "compute": ["gate_bronze", "plan"], "gate_views": ["compute", "plan"],
        "publish": ["compute", "gate_views", "plan"]}


def test_the_batch_trigger_form_asks_only_for_views_and_full_reprocess(report: dict) -> None:
    """The interval is Airflow's own (logical date or data interval), and the restatement
    DAG's late rows travel in the conf: neither is a field of the form (or of the backfill
    dialog, where it would give every run one interval). ``views`` is a multi-select, which
    Airflow's form offers for an array with ``examples``."""
    from lambdalake.views.definition import view_names

    params = report["batch_params"]
    assert sorted(params) == ["full_reprocess", "views"]
    views = params["views"]["schema"]
    assert views["type"] == "array" and views["examples"] == view_names()
    assert views["items"] == {"type": "string", "enum": view_names()}
    assert params["views"]["default"] == view_names()
    assert params["full_reprocess"]["default"] is False
    assert params["full_reprocess"]["schema"]["type"] == "boolean"
