"""The project's files (schemas/, dags/, plugins/, spark_jobs/, include/jvm/) are found under
one setting, LAMBDALAKE_PROJECT_DIR: by default the checkout the package runs from; an
installed package without it says which setting to set, and ``--help`` needs none."""

from __future__ import annotations

from pathlib import Path

import pytest

import lambdalake.cli.main
from lambdalake.contracts.registry import ContractRegistry
from lambdalake.orchestration.spark_jobs import job_path
from lambdalake.settings import CHECKOUT, ProjectDirUnset, Settings, get_settings
from lambdalake.stack.airflow import Airflow
from lambdalake.stack.jars import manifest_dir
from lambdalake.views.definition import view_names
from tests.support.repo import REPO


def test_the_project_s_files_and_the_state_are_under_the_project_dir(tmp_path: Path) -> None:
    settings = Settings(project_dir=tmp_path)
    assert settings.state_dir == tmp_path / ".state"
    assert settings.project_path("schemas", "views") == tmp_path / "schemas" / "views"
    assert manifest_dir(settings) == tmp_path / "include" / "jvm"
    environment = Airflow(settings).environment()
    assert environment["AIRFLOW__CORE__DAGS_FOLDER"] == str(tmp_path / "dags")
    assert environment["AIRFLOW__CORE__PLUGINS_FOLDER"] == str(tmp_path / "plugins")


def test_a_state_dir_set_stays_where_it_is_set(tmp_path: Path) -> None:
    assert Settings(project_dir=tmp_path, state_dir=tmp_path / "s").state_dir == tmp_path / "s"


def test_the_default_is_the_checkout_the_package_runs_from() -> None:
    """From a checkout (``include/`` on the path, or editable): that checkout; from an
    installed package: none (this suite then runs with LAMBDALAKE_PROJECT_DIR set)."""
    import lambdalake

    in_checkout = Path(lambdalake.__file__).resolve().parents[1] == REPO / "include"
    assert CHECKOUT == (REPO if in_checkout else None)
    assert get_settings().project_path() == REPO


def test_the_resources_are_read_through_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    assert job_path("ingest") == REPO / "spark_jobs" / "ingest.py"
    assert ContractRegistry().directory == REPO / "schemas" / "events"
    assert view_names() == sorted(p.stem for p in (REPO / "schemas" / "views").glob("*.yaml"))


def test_without_a_project_dir_a_command_that_needs_it_names_the_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    installed = Settings(project_dir=None, state_dir=tmp_path)
    with pytest.raises(ProjectDirUnset, match="set LAMBDALAKE_PROJECT_DIR"):
        installed.project_path("spark_jobs")
    monkeypatch.setattr(lambdalake.cli.main, "get_settings", lambda: installed)
    monkeypatch.setattr("lambdalake.contracts.registry.get_settings", lambda: installed)
    assert lambdalake.cli.main.main(["contracts", "--offline"]) == 2
    assert "set LAMBDALAKE_PROJECT_DIR" in capsys.readouterr().err


def test_without_a_project_dir_or_a_state_dir_the_settings_name_both(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("LAMBDALAKE_STATE_DIR", raising=False)
    with pytest.raises(ProjectDirUnset, match="LAMBDALAKE_STATE_DIR unset.*LAMBDALAKE_PROJECT_DIR"):
        Settings(project_dir=None)


def test_help_needs_no_settings(monkeypatch: pytest.MonkeyPatch,
                                capsys: pytest.CaptureFixture[str]) -> None:
    def no_settings() -> Settings:
        raise AssertionError("--help read the settings")

    monkeypatch.setattr(lambdalake.cli.main, "get_settings", no_settings)
    with pytest.raises(SystemExit) as exit_:
        lambdalake.cli.main.main(["--help"])
    assert exit_.value.code == 0 and "usage: lambdalake" in capsys.readouterr().out
