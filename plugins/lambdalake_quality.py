"""The "Data quality" page in the Airflow UI: a nav entry under Browse and a tab on every
DAG run, served by a FastAPI app in Airflow's api-server (``lambdalake.quality.page``).

Only logged-in users see it: every route depends on Airflow's own ``get_user`` (the JWT
from the UI's ``_token`` cookie, or a bearer token), and a run's tab also on read access to
that DAG's runs. Nothing heavy is imported here: the plugin loads in every component.
"""

from __future__ import annotations

from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
from airflow.api_fastapi.core_api.security import get_user, requires_access_dag
from airflow.plugins_manager import AirflowPlugin

from lambdalake.quality.page import create_quality_app

URL_PREFIX = "/lambdalake-quality"

quality_app = create_quality_app(
    get_user, run_access=requires_access_dag("GET", DagAccessEntity.RUN))


class LambdalakeQualityPlugin(AirflowPlugin):
    name = "lambdalake_quality"
    fastapi_apps = [{"app": quality_app, "url_prefix": URL_PREFIX, "name": "Data quality"}]
    external_views = [
        {"name": "Data quality", "href": f"{URL_PREFIX.lstrip('/')}/", "destination": "nav",
         "category": "browse", "url_route": "data-quality"},
        {"name": "Data quality", "href": f"{URL_PREFIX.lstrip('/')}/runs/{{DAG_ID}}/{{RUN_ID}}",
         "destination": "dag_run", "url_route": "data-quality-run"},
    ]
