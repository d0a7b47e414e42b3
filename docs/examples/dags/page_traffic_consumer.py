"""An example DAG of yours that waits for one view: each time the batch layer publishes
``page_traffic``, read the rows that publish changed through the query API.

Not one of the platform's DAGs (it is not in ``dags/``): copy it into the DAG folder of the
Airflow that runs lambdalake. It needs no lambdalake code, only the view's asset
``lambdalake://views/page_traffic`` and the query API (``LAMBDALAKE_API_URL``, default
``http://127.0.0.1:8000``; a bearer token in ``LAMBDALAKE_SERVING__API_TOKEN`` if the API
wants one). Airflow gives a run every event since the previous run, so the task reads each
of them; an event's extra says what was published: ``start``/``end`` (None after a full
reprocess, which replaced every window), ``high_water_mark``, ``view_version``,
``delta_version``, ``rows``, ``restatement`` and ``full_reprocess``.
"""

from __future__ import annotations

import json
import os
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from typing import Any

from airflow.sdk import Asset, dag, task

VIEW = "page_traffic"
PAGE_TRAFFIC = Asset(uri=f"lambdalake://views/{VIEW}")
PAGE = 1000  # the query API's largest page


def get_json(url: str) -> dict[str, Any]:
    """One answer of the query API (with the bearer token, when there is one)."""
    request = urllib.request.Request(url)
    if token := os.environ.get("LAMBDALAKE_SERVING__API_TOKEN"):
        request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=30) as answer:
        page: dict[str, Any] = json.load(answer)
    return page


def published_rows(view: str, extra: Mapping[str, Any],
                   get: Callable[[str], dict[str, Any]] = get_json) -> Iterator[dict[str, Any]]:
    """The rows of the windows one publish changed, page by page: those starting in its
    interval, or all of them after a full reprocess."""
    api = os.environ.get("LAMBDALAKE_API_URL", "http://127.0.0.1:8000").rstrip("/")
    window = {"from": extra["start"], "to": extra["end"]} if extra.get("start") else {}
    offset: int | None = 0
    while offset is not None:
        page = get(f"{api}/views/{view}/rows?"
                   + urllib.parse.urlencode({**window, "limit": PAGE, "offset": offset}))
        yield from page["rows"]
        offset = page["next_offset"]


@dag(schedule=PAGE_TRAFFIC, start_date=datetime(2026, 11, 1), catchup=False,
     tags=["example", "lambdalake"], doc_md=__doc__)
def example_page_traffic_consumer() -> None:
    @task
    def read_published_rows(triggering_asset_events: Any = None) -> int:
        """Read what each publish of the view that triggered this run changed."""
        total = 0
        for event in triggering_asset_events[PAGE_TRAFFIC]:
            extra = event.extra
            rows = list(published_rows(VIEW, extra))
            kind = ("full reprocess" if extra["full_reprocess"] else
                    "restatement" if extra["restatement"] else "publish")
            print(f"{kind} of [{extra['start']}, {extra['end']}) by {event.source_run_id}: "
                  f"{len(rows)} rows, high-water mark {extra['high_water_mark']}")
            total += len(rows)
        return total

    read_published_rows()


example_page_traffic_consumer()
