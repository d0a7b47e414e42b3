import shutil
import stat
from pathlib import Path

import pytest
from pydantic import SecretStr

from lambdalake.settings import Settings
from lambdalake.stack.airflow import Airflow
from lambdalake.stack.secrets import MissingSecret, local_secret
from tests.support.settings_factory import MakeSettings


def test_local_secrets_are_generated_once_private_and_reused(
    tmp_path: Path, settings: Settings,
) -> None:
    first = local_secret(settings, "db-password")
    assert len(first) >= 32
    assert local_secret(settings, "db-password") == first
    mode = (tmp_path / "secrets" / "db-password").stat().st_mode
    assert stat.S_IMODE(mode) == 0o600


def test_configured_secrets_win(tmp_path: Path, settings: Settings) -> None:
    assert local_secret(settings, "db-password", SecretStr("from-vault")) == "from-vault"
    assert not (tmp_path / "secrets").exists()


def test_production_never_generates_credentials(make_settings: MakeSettings) -> None:
    settings = make_settings(environment="production")
    with pytest.raises(MissingSecret, match="db-password is not configured"):
        local_secret(settings, "db-password")
    with pytest.raises(MissingSecret):
        Airflow(settings).environment()


def test_airflow_secrets_come_from_the_environment_when_set(
    tmp_path: Path, make_settings: MakeSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    for variable in ("AIRFLOW__CORE__FERNET_KEY", "AIRFLOW__API__SECRET_KEY",
                     "AIRFLOW__API_AUTH__JWT_SECRET"):
        monkeypatch.setenv(variable, f"env-{variable}")
    settings = make_settings(
        environment="production", postgres={"password": "pg"}, airflow={"admin_password": "admin"},
    )
    env = Airflow(settings).environment()
    assert env["AIRFLOW__CORE__FERNET_KEY"] == "env-AIRFLOW__CORE__FERNET_KEY"
    assert ":pg@" in env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]
    assert not (tmp_path / "secrets").exists()


def test_runs_are_triggered_by_an_account_of_its_own_with_airflows_user_role(
    settings: Settings,
) -> None:
    """The restatement DAG's trigger is not the admin: Airflow's ``user`` role may read and
    trigger DAG runs, and nothing else (pools, connections, variables, users)."""
    import json

    airflow = Airflow(settings)
    users = airflow.environment()["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"].split(",")
    assert users == ["admin:admin", "lambdalake-trigger:user"]
    airflow._write_passwords_file()
    passwords = json.loads(airflow.passwords_file.read_text())
    assert passwords == {"admin": airflow.admin_password,
                         "lambdalake-trigger": airflow.trigger_password}
    assert airflow.trigger_password != airflow.admin_password


def test_up_makes_the_state_dir_its_owners_alone_before_it_starts_anything(
    make_settings: MakeSettings, tmp_path: Path
) -> None:
    from lambdalake.operations.platform import Platform

    state_dir = tmp_path / "state"
    state_dir.mkdir(mode=0o755)
    (state_dir / "lake").mkdir()  # an older stack's state: what a local user could read
    modes_at_start: list[int] = []

    class Component:
        label, processes = "first component", []

        def start(self) -> None:
            modes_at_start.append(stat.S_IMODE(state_dir.stat().st_mode))

        def stop(self) -> None: ...

    platform = Platform(make_settings(state_dir=state_dir))
    platform.components = [Component()]
    platform.up(echo=lambda _: None)
    assert modes_at_start == [0o700]


def test_a_state_dir_that_holds_postgresqls_data_itself_keeps_its_mode(tmp_path: Path) -> None:
    """As root the server runs as another user, which must reach data kept in the tree."""
    from lambdalake.stack.secrets import keep_private

    state_dir = tmp_path / "state"
    (state_dir / "postgres" / "data").mkdir(parents=True)
    state_dir.chmod(0o755)
    assert keep_private(state_dir) is False
    assert stat.S_IMODE(state_dir.stat().st_mode) == 0o755
    fresh = tmp_path / "fresh"
    assert keep_private(fresh) is True and stat.S_IMODE(fresh.stat().st_mode) == 0o700


def test_make_up_names_where_the_admin_password_is_never_the_password(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from lambdalake.cli.main import build_parser
    from lambdalake.cli.stack import cmd_up
    from lambdalake.operations.platform import Platform

    monkeypatch.setattr(Platform, "up", lambda self: 0.0)  # the stack itself is not started
    password = Airflow(settings).admin_password
    assert cmd_up(settings, build_parser().parse_args(["up"])) == 0
    shown = capsys.readouterr().out
    assert password not in shown
    assert f"password in {settings.state_dir / 'secrets' / 'airflow-admin-password'}" in shown


def test_a_new_state_dir_gets_a_new_database_where_an_old_one_at_its_path_was_left(
    make_settings: MakeSettings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A private state dir keeps PostgreSQL's data under /var/tmp, named after its path: a
    fresh clone at the path of a removed one must not find that clone's Airflow database."""
    from lambdalake.stack import postgres
    from lambdalake.stack.postgres import Postgres

    monkeypatch.setattr(postgres, "_reachable_by_server_user", lambda directory: False)
    monkeypatch.setattr(postgres, "_run_as", lambda: {})
    state_dir = tmp_path / "clone" / ".state"
    first = Postgres(make_settings(state_dir=state_dir)).data_dir
    try:
        (first / "PG_VERSION").write_text("17")  # the old clone's database
        shutil.rmtree(tmp_path / "clone")       # the clone is removed, its data stays
        again = Postgres(make_settings(state_dir=state_dir)).data_dir
        assert again == first and not (again / "PG_VERSION").exists()
        assert (state_dir / "postgres" / "data").resolve() == again
    finally:
        shutil.rmtree(first.parent, ignore_errors=True)


def test_airflow_sends_its_own_metrics_as_statsd_unless_told_not_to(
    make_settings: MakeSettings,
) -> None:
    sending = Airflow(make_settings(metrics={"airflow_statsd_port": 9125})).environment()
    assert {key: sending[key] for key in sending if key.startswith("AIRFLOW__METRICS__")} == {
        "AIRFLOW__METRICS__STATSD_ON": "True", "AIRFLOW__METRICS__STATSD_HOST": "127.0.0.1",
        "AIRFLOW__METRICS__STATSD_PORT": "9125", "AIRFLOW__METRICS__STATSD_PREFIX": "airflow"}
    silent = Airflow(make_settings(metrics={"airflow_statsd_host": None})).environment()
    assert silent["AIRFLOW__METRICS__STATSD_ON"] == "False"
