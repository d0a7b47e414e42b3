"""A small client of Airflow 3's REST API: log in, trigger a DAG run, wait for it.

Used by ``lambdalake demo``, by the restatement DAG (which triggers batch runs) and by tests
that drive the real Airflow like a user would.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx

from lambdalake.settings import Settings
from lambdalake.timeutil import iso_utc

TERMINAL_STATES = {"success", "failed"}
PAGE_SIZE = 100
"""Items asked for per page (Airflow may return fewer: its ``maximum_page_limit``)."""


class AirflowApiError(RuntimeError):
    """Airflow answered with an error, or a run did not finish as expected."""


@dataclass
class AirflowClient:
    base_url: str
    username: str
    password: str
    timeout: float = 10.0

    def __post_init__(self) -> None:
        self._http = httpx.Client(base_url=self.base_url, timeout=self.timeout)
        response = self._http.post(
            "/auth/token", json={"username": self.username, "password": self.password}
        )
        if response.status_code >= 300:
            raise AirflowApiError(f"login as {self.username} failed: {response.status_code}")
        self._http.headers["Authorization"] = f"Bearer {response.json()['access_token']}"

    def _call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        response = self._http.request(method, f"/api/v2{path}", **kwargs)
        if response.status_code >= 300:
            raise AirflowApiError(f"{method} {path}: {response.status_code} {response.text[:500]}")
        return response.json() if response.content else {}

    def wait_for_dag(self, dag_id: str, timeout: float = 120.0) -> None:
        """Wait until the dag-processor has parsed ``dag_id``."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self._call("GET", f"/dags/{dag_id}")
                return
            except AirflowApiError as error:
                if time.monotonic() > deadline:
                    raise AirflowApiError(
                        f"DAG {dag_id} was not parsed within {timeout:.0f}s") from error
                time.sleep(2)

    def unpause(self, dag_id: str) -> None:
        self._call("PATCH", f"/dags/{dag_id}", json={"is_paused": False})

    def pause(self, dag_id: str) -> None:
        self._call("PATCH", f"/dags/{dag_id}", json={"is_paused": True})

    def trigger(self, dag_id: str, conf: dict[str, Any] | None = None,
                run_id: str | None = None, interval: tuple[datetime, datetime] | None = None,
                note: str | None = None) -> str:
        """Trigger a run (``run_id``: Airflow's own when None); return its run id.

        ``interval`` becomes the run's data interval, so its page shows what it computes.
        Airflow sets a data interval only with a logical date; the trigger moment is that
        date, since each logical date is one run's (a scheduled run's is its interval's
        start). ``note``: the run page's note (Markdown), e.g. why the run was triggered.
        """
        body: dict[str, Any] = {"logical_date": None, "conf": conf or {}}
        if interval is not None:
            body.update(logical_date=datetime.now(UTC).isoformat(),
                        data_interval_start=iso_utc(interval[0]),
                        data_interval_end=iso_utc(interval[1]))
        if run_id is not None:
            body["dag_run_id"] = run_id
        if note is not None:
            body["note"] = note
        run = self._call("POST", f"/dags/{dag_id}/dagRuns", json=body)
        return str(run["dag_run_id"])

    def set_note(self, dag_id: str, run_id: str, note: str) -> None:
        """Replace a run's note (Markdown, shown on its page)."""
        self._call("PATCH", f"/dags/{dag_id}/dagRuns/{run_id}",
                   params={"update_mask": "note"}, json={"note": note})

    def active_runs(self, dag_id: str) -> list[dict[str, Any]]:
        """The DAG's queued and running runs, with their conf and data interval."""
        params = {"limit": 100, "state": ["queued", "running"]}
        return list(self._call("GET", f"/dags/{dag_id}/dagRuns", params=params)["dag_runs"])

    def dag_run(self, dag_id: str, run_id: str) -> dict[str, Any]:
        """One run as its page shows it: state, data interval, conf, note and more."""
        return self._call("GET", f"/dags/{dag_id}/dagRuns/{run_id}")

    def run_state(self, dag_id: str, run_id: str) -> str:
        return str(self.dag_run(dag_id, run_id)["state"])

    def task_states(self, dag_id: str, run_id: str) -> dict[str, str]:
        instances = self._call("GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances")
        return {ti["task_id"]: ti["state"] for ti in instances["task_instances"]}

    def task_instance(self, dag_id: str, run_id: str, task_id: str) -> dict[str, Any]:
        """One task instance of a run: its state, try number, times and more."""
        return self._call("GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}")

    def wait_for_run(self, dag_id: str, run_id: str, timeout: float = 900.0) -> str:
        """Poll until the run finishes; return its final state."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self.run_state(dag_id, run_id)
            if state in TERMINAL_STATES:
                return state
            time.sleep(3)
        raise AirflowApiError(f"{dag_id} run {run_id} did not finish within {timeout:.0f}s")

    def dag_runs(self, dag_id: str, run_type: str | None = None,
                 ended_after: datetime | None = None) -> list[dict[str, Any]]:
        """All the DAG's runs, newest first, page by page: optionally of one type
        (scheduled, manual, backfill), or only those that ended after ``ended_after``."""
        params: dict[str, Any] = {"limit": PAGE_SIZE, "order_by": "-run_after", "offset": 0}
        if run_type:
            params["run_type"] = run_type
        if ended_after is not None:
            params["end_date_gte"] = ended_after.isoformat()
        runs: list[dict[str, Any]] = []
        while True:
            page = self._call("GET", f"/dags/{dag_id}/dagRuns", params=params)
            runs.extend(page["dag_runs"])
            total = page.get("total_entries")
            if not page["dag_runs"] or (total is not None and len(runs) >= total):
                return runs
            params["offset"] = len(runs)

    def latest_backfill(self, dag_id: str) -> dict[str, Any] | None:
        backfills = self._call("GET", "/backfills", params={"dag_id": dag_id, "limit": 100})
        return max(backfills["backfills"], key=lambda b: b["id"], default=None)

    def wait_for_backfill(self, backfill_id: int, timeout: float = 1800.0) -> dict[str, Any]:
        """Poll until the backfill completed (all its runs finished); return it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            backfill = self._call("GET", f"/backfills/{backfill_id}")
            if backfill.get("completed_at"):
                return backfill
            time.sleep(5)
        raise AirflowApiError(f"backfill {backfill_id} did not complete within {timeout:.0f}s")


def trigger_client(settings: Settings) -> AirflowClient:
    """A client of the configured Airflow as the account that triggers runs (Airflow's
    ``user`` role: it reads and triggers DAG runs, and may change nothing else)."""
    from lambdalake.stack.airflow import Airflow

    airflow = settings.airflow
    return AirflowClient(airflow.base_url, airflow.trigger_user,
                         Airflow(settings).trigger_password)


def admin_client(settings: Settings) -> AirflowClient:
    """A client of the configured Airflow, as its admin (whose password in local dev is the
    one the stack generated)."""
    from lambdalake.stack.airflow import Airflow

    airflow = settings.airflow
    return AirflowClient(airflow.base_url, airflow.admin_user, Airflow(settings).admin_password)
