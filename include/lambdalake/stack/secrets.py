"""Credentials of the local stack: configured ones win; in local dev, generated once and kept.

A generated secret is written to ``<state dir>/secrets/<name>`` with mode 0600 and reused
on every later start, so restarts keep working and nothing is a hard-coded default. With
``LAMBDALAKE_ENVIRONMENT=production`` nothing is generated: a missing secret is an error.
"""

from __future__ import annotations

import logging
import os
import secrets
from collections.abc import Callable
from pathlib import Path

from pydantic import SecretStr

from lambdalake.settings import Settings

log = logging.getLogger(__name__)


def keep_private(state_dir: Path) -> bool:
    """Make the state dir (created if missing) its owner's alone, mode 0700: it holds the
    lake, the object store's backing files, logs and the generated secrets, and a local
    user who could read them would pass every authentication the stack has. Whether it is.

    An existing dir that holds PostgreSQL's data itself keeps its mode: as root the server
    runs as another user, which must reach that data (a new stack keeps its data outside a
    private dir, ``Postgres.data_dir``); ``make clean`` and ``make up`` make it private."""
    state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    database = state_dir / "postgres" / "data"
    if database.is_dir() and not database.is_symlink():
        log.warning("the state dir %s stays readable by other users: it holds PostgreSQL's "
                    "data (make clean, then make up, makes it private)", state_dir)
        return False
    state_dir.chmod(0o700)
    return True


class MissingSecret(RuntimeError):
    """A production configuration lacks a credential that local dev would generate."""


def local_secret(
    settings: Settings,
    name: str,
    configured: SecretStr | None = None,
    generate: Callable[[], str] = lambda: secrets.token_urlsafe(32),
) -> str:
    """The configured secret, or the local one made (by ``generate``) on first use."""
    if configured is not None:
        return configured.get_secret_value()
    if settings.environment != "local":
        raise MissingSecret(
            f"{name} is not configured and LAMBDALAKE_ENVIRONMENT={settings.environment}: "
            "set it from your secret store (see docs/operations/configuration.md)"
        )
    path = secrets_dir(settings) / name
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(generate())
    return path.read_text().strip()


def secrets_dir(settings: Settings) -> Path:
    return settings.state_dir / "secrets"
