"""The whole local stack, as `make up` runs it: healthy, runs DAGs, and `down` leaves nothing.

This module brings up its own stack (own state dir and ports), so it never disturbs the
broker the rest of the session shares.
"""

from __future__ import annotations

import ipaddress
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

import httpx
import psutil
import pytest

from lambdalake.orchestration.airflow_api import AirflowClient
from lambdalake.settings import Settings, isolated_environment
from lambdalake.stack.airflow import airflow_executable
from lambdalake.stack.platform import Platform

STACK_ENV = isolated_environment("test-platform", port_prefix=2)


@pytest.fixture(scope="module")
def platform(fresh_platform: Callable[[dict[str, str]], AbstractContextManager[Platform]]
             ) -> Iterator[Platform]:
    with fresh_platform(STACK_ENV) as stack:
        yield stack


def stack_processes(settings: Settings) -> list[psutil.Process]:
    """Every process on this machine that belongs to the stack's state dir."""
    found = []
    marker = str(settings.state_dir)
    for process in psutil.process_iter(["cmdline", "cwd", "environ"]):
        try:
            cmdline = " ".join(process.info["cmdline"] or [])
            state_dir = (process.info["environ"] or {}).get("LAMBDALAKE_STATE_DIR", "")
            if marker in cmdline or marker in (process.info["cwd"] or "") or state_dir == marker:
                found.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def test_up_is_healthy_and_idempotent(platform: Platform) -> None:
    assert all(status.running for status in platform.status())
    assert {s.name for s in platform.status()} >= {"postgres", "kafka-1", "ingest", "serving-api",
                                                    "airflow-scheduler", "airflow-api-server"}
    assert platform.airflow.unhealthy_components() == []
    assert platform.kafka.live_brokers() == 1
    assert platform.postgres.ready()
    pids = [s.pid for s in platform.status()]
    platform.up()  # a second `make up` starts nothing new
    assert [s.pid for s in platform.status()] == pids


def test_everything_listens_on_loopback_only(platform: Platform) -> None:
    pids = {p.pid for status in platform.status() for p in psutil.Process(status.pid).children(recursive=True)}
    pids |= {status.pid for status in platform.status()}
    listening = [
        c for c in psutil.net_connections(kind="inet")
        if c.status == psutil.CONN_LISTEN and c.pid in pids
    ]
    assert listening, "the stack listens nowhere?"
    exposed = [(c.laddr.ip, c.laddr.port) for c in listening if not is_loopback(c.laddr.ip)]
    assert exposed == []


def is_loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    mapped = getattr(ip, "ipv4_mapped", None)
    return (mapped or ip).is_loopback


def test_airflow_dags_test_of_the_smoke_dag(platform: Platform) -> None:
    started = time.monotonic()
    result = subprocess.run(
        [airflow_executable(), "dags", "test", "lambdalake_smoke"],
        env=platform.airflow.environment(), capture_output=True, text=True, timeout=600,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert "smoke: 1000 rows in Delta for 1000 Kafka records" in output
    assert "state=success" in output
    print(f"airflow dags test took {time.monotonic() - started:.1f}s")


def test_a_triggered_run_succeeds_through_the_scheduler(platform: Platform) -> None:
    settings = platform.settings
    client = AirflowClient(
        settings.airflow.base_url, settings.airflow.admin_user, platform.airflow.admin_password
    )
    client.wait_for_dag("lambdalake_smoke")
    client.unpause("lambdalake_smoke")
    run_id = client.trigger("lambdalake_smoke", {"events": 50})
    assert client.wait_for_run("lambdalake_smoke", run_id, timeout=600) == "success"
    assert client.task_states("lambdalake_smoke", run_id) == {
        "produce": "success", "kafka_to_delta": "success",
    }


def test_the_supervisor_dag_restarts_a_killed_speed_layer(platform: Platform) -> None:
    settings = platform.settings
    killed = platform.speed.process.pid()
    assert killed is not None, "`up` starts the speed layer"
    platform.speed.process.kill()
    client = AirflowClient(
        settings.airflow.base_url, settings.airflow.admin_user, platform.airflow.admin_password
    )
    dag_id = "lambdalake_speed_supervisor"
    client.wait_for_dag(dag_id)
    client.unpause(dag_id)  # active from creation; say so anyway
    run_id = client.trigger(dag_id, {})
    assert client.wait_for_run(dag_id, run_id, timeout=600) == "success"
    assert client.task_states(dag_id, run_id) == {"supervise": "success", "alert": "skipped"}
    restarted = platform.speed.process.pid()
    assert restarted is not None and restarted != killed


def test_the_query_api_runs_with_the_stack(platform: Platform) -> None:
    base = platform.settings.serving.base_url
    assert httpx.get(f"{base}/health", timeout=10).status_code == 200
    assert "/views/{view}/rows" in httpx.get(f"{base}/openapi.json", timeout=10).json()["paths"]
    answer = httpx.get(f"{base}/views/page_traffic/rows", timeout=10)
    assert answer.status_code == 200 and "high_water_mark" in answer.json()["snapshot"]
    assert httpx.get(f"{base}/views/nope/rows", timeout=10).status_code == 404


def test_down_stops_everything_it_started(platform: Platform) -> None:
    assert stack_processes(platform.settings), "the stack's processes should be findable"
    stopped = platform.down()
    assert len(stopped) == len(platform.processes())
    deadline = time.monotonic() + 10
    while stack_processes(platform.settings) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert stack_processes(platform.settings) == []
    assert platform.down() == []

