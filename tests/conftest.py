"""Test-session wiring shared by unit and integration tests.

Tests run against their own state dir and port range (so a `make up` stack on the default
ports is never touched) but reuse the jars that setup resolved. Integration fixtures start
each real component once per session, or reuse one already running on the test ports.
"""

from __future__ import annotations

import os

from lambdalake.settings import PROJECT_ROOT

TEST_ENVIRONMENT = {
    "LAMBDALAKE_STATE_DIR": str(PROJECT_ROOT / ".state" / "test"),
    "LAMBDALAKE_JARS_DIR": str(PROJECT_ROOT / ".state" / "jars"),
    "LAMBDALAKE_BROKER__FIRST_PORT": "19092",
    "LAMBDALAKE_POSTGRES__PORT": "15433",
    "LAMBDALAKE_AIRFLOW__PORT": "18080",
    "LAMBDALAKE_SPARK__SHUFFLE_PARTITIONS": "2",
}
for key, value in TEST_ENVIRONMENT.items():
    os.environ.setdefault(key, value)
