"""The Airflow plugins: they load cheaply, and the quality page is mounted behind Airflow's
login."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.support.repo import REPO

PLUGIN = REPO / "plugins" / "lambdalake_quality.py"
RESERVED = ("/api/v2", "/ui", "/execution", "/auth", "/pluginsv2")


def load_plugin() -> ModuleType:
    spec = importlib.util.spec_from_file_location("lambdalake_quality", PLUGIN)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_page_is_mounted_and_linked_from_the_nav_and_every_run() -> None:
    plugin = load_plugin().LambdalakeQualityPlugin
    [app] = plugin.fastapi_apps
    assert app["url_prefix"].startswith("/") and not app["url_prefix"].startswith(RESERVED)
    views = {view["destination"]: view for view in plugin.external_views}
    assert set(views) == {"nav", "dag_run"}
    assert all(view["name"] and view["href"] and not view["href"].startswith("/")
               for view in views.values())
    assert "{DAG_ID}" in views["dag_run"]["href"] and "{RUN_ID}" in views["dag_run"]["href"]


def test_every_route_depends_on_airflows_login() -> None:
    from airflow.api_fastapi.core_api.security import get_user

    app = load_plugin().quality_app
    assert any(dependency.dependency is get_user for dependency in app.router.dependencies)


@pytest.mark.parametrize("plugin", [PLUGIN, REPO / "plugins" / "lambdalake_status.py"],
                         ids=lambda path: path.stem)
def test_loading_it_imports_nothing_heavy(plugin: Path) -> None:
    code = (f"import importlib.util, sys; spec = importlib.util.spec_from_file_location('p', "
            f"{str(plugin)!r}); module = importlib.util.module_from_spec(spec); "
            "spec.loader.exec_module(module); "
            "print(sorted(m for m in ('pyspark', 'great_expectations', 'deltalake', "
            "'confluent_kafka', 'duckdb') if m in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True).stdout.strip().splitlines()[-1]  # after Airflow's logs
    assert loaded == "[]"
