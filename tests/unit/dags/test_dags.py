"""Every DAG file imports cleanly, parses fast, and pulls in nothing heavy at module level;
the assets they emit and wait for are the views'. The example DAG of docs/examples/dags parses
too."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.support.repo import REPO

DAGS = REPO / "dags"
EXAMPLES = REPO / "docs" / "examples" / "dags"
HEAVY = ("pyspark", "great_expectations", "confluent_kafka", "delta", "deltalake")

PROBE = f"HEAVY = {HEAVY!r}\n" + """
import json, pathlib, sys, time
from airflow.dag_processing.dagbag import DagBag
import airflow.sdk  # warm the SDK, so each file's time is its own

def schedule(condition):  # an asset condition as JSON: its type and assets, or an asset's URI
    if hasattr(condition, "objects"):
        return [type(condition).__name__, [schedule(o) for o in condition.objects]]
    return [type(condition).__name__, condition.uri]

def examples(folder):
    found = DagBag(dag_folder=folder, collect_dags=False)
    for path in sorted(pathlib.Path(folder).glob("*.py")):
        found.process_file(str(path))
    return {"errors": {k: str(v) for k, v in found.import_errors.items()},
            "schedules": {dag_id: schedule(dag.timetable.asset_condition)
                          for dag_id, dag in found.dags.items()}}
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
    "publish_outlets": [[type(o).__name__, o.name] for o in
                        bag.dags["lambdalake_batch_views"].get_task("publish").outlets],
    "serving_schedule": schedule(bag.dags["lambdalake_serving"].timetable.asset_condition),
    "examples": examples(sys.argv[2]),
}))
"""


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """What a DagBag makes of the DAG files, in a fresh interpreter (one for the module)."""
    home = tmp_path_factory.mktemp("airflow-home")
    env = {**os.environ, "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
           "AIRFLOW__CORE__UNIT_TEST_MODE": "True"}
    result = subprocess.run(
        [sys.executable, "-c", PROBE, str(DAGS), str(EXAMPLES)], capture_output=True,
        text=True, env=env,
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


def test_publish_emits_through_the_alias_of_the_published_views_and_no_static_asset(
    report: dict,
) -> None:
    """A static outlet gets an event each time the task succeeds, so a run of two views would
    announce all of them: ``publish`` adds an event per view it published to the alias."""
    from lambdalake.views import PUBLISHED_ALIAS

    assert report["publish_outlets"] == [["AssetAlias", PUBLISHED_ALIAS]]


def test_serving_runs_on_any_view_published(report: dict) -> None:
    """Each view's asset, so the asset graph shows every view the serving DAG waits for; any
    one of them starts a run (a list would wait for all of them)."""
    from lambdalake.views import view_asset_uri
    from lambdalake.views.definition import view_names

    assert report["serving_schedule"] == [
        "AssetAny", [["Asset", view_asset_uri(view)] for view in view_names()]]


def test_the_example_downstream_dag_parses_and_waits_for_one_view(report: dict) -> None:
    from lambdalake.views import view_asset_uri

    assert report["examples"] == {
        "errors": {},
        "schedules": {"example_page_traffic_consumer": ["Asset", view_asset_uri("page_traffic")]},
    }
