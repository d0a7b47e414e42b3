"""Airflow 3 on the local stack: api-server, scheduler, dag-processor, triggerer.

A LocalExecutor with warm workers (``orchestration.executor``) on the stack's PostgreSQL,
this repo's ``dags/`` and ``plugins/``, a small parallelism and a pool that bounds
concurrent Spark jobs. Login is Airflow's simple auth manager with an admin user and the
account the restatement DAG triggers runs with (role ``user``: it cannot change pools,
connections, variables or users), whose passwords are generated once for local
development (or taken from ``LAMBDALAKE_AIRFLOW__ADMIN_PASSWORD`` and
``LAMBDALAKE_AIRFLOW__TRIGGER_PASSWORD``). Every secret Airflow needs (Fernet key,
API secret, JWT secret) comes from the same place, never from a hard-coded default.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import sys
import urllib.request
from pathlib import Path

from lambdalake.settings import Settings
from lambdalake.stack.postgres import Postgres
from lambdalake.stack.process import ManagedProcess, StackError, run_checked
from lambdalake.stack.secrets import local_secret

SERVICES = ("api-server", "scheduler", "dag-processor", "triggerer")
HEALTH_COMPONENTS = ("metadatabase", "scheduler", "dag_processor", "triggerer")
EXECUTOR = "lambdalake.orchestration.executor.WarmLocalExecutor"
KNOWN_WARNINGS = ("ignore:The `airflow.utils.operator_helpers.determine_kwargs` attribute is "
                  "deprecated:FutureWarning")
"""Python's warning filter (``PYTHONWARNINGS``) for Airflow's processes: Airflow's standard
provider, which ``@task.sensor`` loads in every task of the batch DAG, imports a name
Airflow 3.3 deprecated, and the warning headed every task log (nothing of ours uses it)."""
"""LocalExecutor whose workers start with the Spark steps' libraries imported."""
ADMIN_PASSWORD = "airflow-admin-password"
TRIGGER_PASSWORD = "airflow-trigger-password"
"""The local dev admin password's file under the secrets dir (generated once, mode 0600)."""


def airflow_executable() -> str:
    candidate = Path(sys.executable).with_name("airflow")
    return str(candidate) if candidate.exists() else (shutil.which("airflow") or "airflow")


def _fernet_key() -> str:
    return base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()


def _jwt_secret() -> str:
    return secrets.token_urlsafe(64)  # Airflow warns about HMAC keys under 64 bytes


class Airflow:
    """The Airflow services of the local stack."""

    label = "Airflow"

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.home = settings.state_dir / "airflow"
        run_dir = settings.state_dir / "run"
        self.services = {name: ManagedProcess(f"airflow-{name}", run_dir) for name in SERVICES}

    @property
    def processes(self) -> list[ManagedProcess]:
        """Its services: api-server, scheduler, dag-processor, triggerer."""
        return list(self.services.values())

    @property
    def admin_password(self) -> str:
        return local_secret(
            self.settings, ADMIN_PASSWORD, self.settings.airflow.admin_password
        )

    @property
    def trigger_password(self) -> str:
        return local_secret(
            self.settings, TRIGGER_PASSWORD, self.settings.airflow.trigger_password
        )

    def environment(self) -> dict[str, str]:
        """The process environment every Airflow command of the stack runs with."""
        af = self.settings.airflow
        base_url = af.base_url
        return {
            **os.environ,
            "AIRFLOW_HOME": str(self.home),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": Postgres(self.settings).sqlalchemy_url,
            "AIRFLOW__CORE__EXECUTOR": EXECUTOR,
            "AIRFLOW__CORE__DAGS_FOLDER": str(self.settings.project_path("dags")),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(self.settings.project_path("plugins")),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__PARALLELISM": str(af.parallelism),
            "AIRFLOW__CORE__AUTH_MANAGER": (
                "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
            ),
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": (
                f"{af.admin_user}:admin,{af.trigger_user}:user"),
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(self.passwords_file),
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{base_url}/execution/",
            "AIRFLOW__API__HOST": af.host,
            "AIRFLOW__API__PORT": str(af.port),
            "AIRFLOW__API__BASE_URL": base_url,
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "10",
            "AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK": "False",
            "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(self.home / "logs"),
            "PYTHONWARNINGS": ",".join(filter(None, (os.environ.get("PYTHONWARNINGS"),
                                                    KNOWN_WARNINGS))),
            **self._metrics(),
            **self._secrets(),
        }

    def _metrics(self) -> dict[str, str]:
        """Airflow's own metrics (scheduler loop, DAG run and task durations, pool slots) as
        StatsD to ``metrics.airflow_statsd_host``, or none."""
        metrics = self.settings.metrics
        if metrics.airflow_statsd_host is None:
            return {"AIRFLOW__METRICS__STATSD_ON": "False"}
        return {"AIRFLOW__METRICS__STATSD_ON": "True",
                "AIRFLOW__METRICS__STATSD_HOST": metrics.airflow_statsd_host,
                "AIRFLOW__METRICS__STATSD_PORT": str(metrics.airflow_statsd_port),
                "AIRFLOW__METRICS__STATSD_PREFIX": "airflow"}

    def _secrets(self) -> dict[str, str]:
        """Airflow's own secrets: from the environment, else generated for local dev."""
        wanted = {
            "AIRFLOW__CORE__FERNET_KEY": ("airflow-fernet-key", _fernet_key),
            "AIRFLOW__API__SECRET_KEY": ("airflow-api-secret-key",
                                         lambda: secrets.token_urlsafe(32)),
            "AIRFLOW__API_AUTH__JWT_SECRET": ("airflow-jwt-secret", _jwt_secret),
        }
        return {
            variable: os.environ.get(variable)
            or local_secret(self.settings, name, generate=generate)
            for variable, (name, generate) in wanted.items()
        }

    @property
    def passwords_file(self) -> Path:
        return self.home / "simple_auth_manager_passwords.json"

    def _write_passwords_file(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.passwords_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            json.dump({self.settings.airflow.admin_user: self.admin_password,
                       self.settings.airflow.trigger_user: self.trigger_password}, handle)

    def cli(self, *args: str) -> None:
        """Run one ``airflow`` CLI command with the stack's environment; raise on failure."""
        run_checked(
            [airflow_executable(), *args],
            self.settings.state_dir / "logs" / "airflow-cli.log",
            env=self.environment(),
        )

    def migrate(self) -> None:
        self._write_passwords_file()
        self.cli("db", "migrate")
        af = self.settings.airflow
        self.cli("pools", "set", af.spark_pool, str(af.spark_pool_slots),
                 "Bounds concurrent Spark jobs (2 cores on the reference machine)")

    def start(self, timeout: float = 150.0) -> None:
        self.migrate()
        env = self.environment()
        af = self.settings.airflow
        commands = {
            "api-server": ["api-server", "--host", af.host, "--port", str(af.port)],
            "scheduler": ["scheduler", "--skip-serve-logs"],
            "dag-processor": ["dag-processor"],
            "triggerer": ["triggerer", "--skip-serve-logs"],
        }
        api = self.services["api-server"]
        api.start([airflow_executable(), *commands.pop("api-server")], env=env, cwd=self.home)
        # tasks report to the api-server's execution API: it must answer before they run
        api.wait_until(lambda: bool(self.health()), timeout, "the api-server answers HTTP")
        for name, args in commands.items():
            self.services[name].start([airflow_executable(), *args], env=env, cwd=self.home)
        api.wait_until(
            lambda: self.unhealthy_components() == [], timeout,
            f"{af.base_url}/api/v2/monitor/health reports every component healthy",
        )

    def health(self) -> dict[str, dict[str, object]]:
        url = f"{self.settings.airflow.base_url}/api/v2/monitor/health"
        with urllib.request.urlopen(url, timeout=3) as response:
            health: dict[str, dict[str, object]] = json.load(response)
            return health

    def unhealthy_components(self) -> list[str]:
        """Components not yet healthy; the stack is healthy when this is empty."""
        for service in self.services.values():
            if service.pid() is None:
                raise StackError(
                    f"{service.name} is not running; see {service.log_file}:\n{service.log_tail()}"
                )
        report = self.health()
        return [c for c in HEALTH_COMPONENTS if report.get(c, {}).get("status") != "healthy"]

    def stop(self) -> None:
        for service in self.services.values():
            service.stop(timeout=30)
