"""The "Pipeline status" page in the Airflow UI: a nav entry under Browse, served by a
FastAPI app in Airflow's api-server (``lambdalake.operations.status_page``).

Only logged-in users see it (Airflow's own ``get_user``, as on the Data quality page).
The DAG runs whose durations it charts come from Airflow's metadata database, which the
api-server holds; nothing heavy is imported here: the plugin loads in every component.
"""

from __future__ import annotations

from typing import Any

from airflow.api_fastapi.core_api.security import get_user
from airflow.plugins_manager import AirflowPlugin

from lambdalake.operations.status_page import create_status_app

URL_PREFIX = "/lambdalake-status"
RECENT_RUNS = 500
"""How many of the newest DAG runs the run-duration chart draws."""


def recent_dag_runs() -> list[dict[str, Any]]:
    """The newest runs of every DAG, newest first, from Airflow's metadata database."""
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session

    with create_session() as session:  # Airflow's ORM session: no SQLAlchemy of our own
        runs = (session.query(DagRun).filter(DagRun.start_date.is_not(None))
                .order_by(DagRun.start_date.desc()).limit(RECENT_RUNS).all())
        return [{"dag_id": run.dag_id, "run_id": run.run_id, "start": run.start_date,
                 "end": run.end_date, "state": str(run.state)} for run in runs]


status_app = create_status_app(get_user, recent_dag_runs)


class LambdalakeStatusPlugin(AirflowPlugin):
    name = "lambdalake_status"
    fastapi_apps = [{"app": status_app, "url_prefix": URL_PREFIX, "name": "Pipeline status"}]
    external_views = [
        {"name": "Pipeline status", "href": f"{URL_PREFIX.lstrip('/')}/", "destination": "nav",
         "category": "browse", "url_route": "pipeline-status"},
    ]
