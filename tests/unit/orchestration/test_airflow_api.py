"""What the REST client sends Airflow to trigger a run (Airflow answered in memory), and the
``lambdalake recompute`` command that triggers through it."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from lambdalake.cli.main import main
from lambdalake.orchestration import airflow_api
from lambdalake.orchestration.airflow_api import AirflowClient

START = datetime(2026, 11, 18, tzinfo=UTC)
END = datetime(2026, 11, 20, 6, tzinfo=UTC)
Posted = list[dict[str, Any]]


@pytest.fixture
def posted(monkeypatch: pytest.MonkeyPatch) -> Posted:
    """The bodies of the runs triggered, each answered as Airflow does (its run id)."""
    bodies: Posted = []

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/auth/token":
            return httpx.Response(201, json={"access_token": "t"})
        body = json.loads(request.content)
        bodies.append(body)
        return httpx.Response(200, json={"dag_run_id": body.get("dag_run_id") or "manual__1"})

    client = httpx.Client
    monkeypatch.setattr(airflow_api.httpx, "Client", lambda **kwargs: client(
        transport=httpx.MockTransport(answer), **kwargs))
    return bodies


def test_a_programmatic_trigger_sets_the_runs_data_interval_and_note(posted: Posted) -> None:
    """Airflow takes a data interval only beside a logical date: the trigger moment, which
    no scheduled run (logical date = its interval's start) or other trigger has."""
    client = AirflowClient("http://airflow", "user", "secret")
    before = datetime.now(UTC)
    run_id = client.trigger("lambdalake_batch_views", {"views": ["funnel"]}, "restate__x",
                            (START, END), "Triggered by [a run](/dags/d/runs/r)")
    (body,) = posted
    assert run_id == "restate__x"
    assert {k: v for k, v in body.items() if k != "logical_date"} == {
        "dag_run_id": "restate__x", "conf": {"views": ["funnel"]},
        "data_interval_start": "2026-11-18T00:00:00Z",
        "data_interval_end": "2026-11-20T06:00:00Z",
        "note": "Triggered by [a run](/dags/d/runs/r)"}
    assert before <= datetime.fromisoformat(body["logical_date"]) <= datetime.now(UTC)


def test_a_trigger_without_an_interval_leaves_the_logical_date_to_airflow(posted: Posted
                                                                          ) -> None:
    AirflowClient("http://airflow", "user", "secret").trigger(
        "lambdalake_batch_views", {"full_reprocess": True})
    assert posted == [{"logical_date": None, "conf": {"full_reprocess": True}}]


@pytest.fixture
def recompute(posted: Posted, monkeypatch: pytest.MonkeyPatch,
              capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str]]:
    """``lambdalake recompute`` with its arguments; its exit code and output."""
    monkeypatch.setattr(airflow_api, "trigger_client",
                        lambda settings: AirflowClient("http://airflow", "user", "secret"))

    def run(*args: str) -> tuple[int, str]:
        code = main(["recompute", *args])
        out, err = capsys.readouterr()
        return code, out + err
    return run


def test_recompute_triggers_one_run_over_its_interval(
    posted: Posted, recompute: Callable[..., tuple[int, str]],
) -> None:
    code, out = recompute("--start", "2026-11-18T00:00:00Z", "--end", "2026-11-20T06:00:00Z",
                          "--views", "funnel", "page_traffic")
    assert code == 0 and "run manual__1 for [2026-11-18T00:00:00Z, 2026-11-20T06:00:00Z)" in out
    (body,) = posted
    assert (body["data_interval_start"], body["data_interval_end"]) == (
        "2026-11-18T00:00:00Z", "2026-11-20T06:00:00Z")
    assert body["conf"] == {"full_reprocess": False, "views": ["funnel", "page_traffic"]}
    assert datetime.fromisoformat(body["logical_date"]) > END + timedelta(days=1)

    assert recompute("--full-reprocess", "--views", "funnel")[0] == 0
    assert posted[1] == {"logical_date": None,
                         "conf": {"full_reprocess": True, "views": ["funnel"]}}


@pytest.mark.parametrize(("args", "message"), [
    (["--start", "2026-11-18T00:00:00Z"], "give --start and --end"),
    (["--full-reprocess", "--end", "2026-11-18T00:00:00Z"], "covers all of history"),
    (["--full-reprocess", "--views", "nope"], "unknown views ['nope']"),
])
def test_recompute_refuses_what_no_run_could_compute(
    posted: Posted, recompute: Callable[..., tuple[int, str]], args: list[str], message: str,
) -> None:
    code, out = recompute(*args)
    assert code == 2 and message in out and posted == []
