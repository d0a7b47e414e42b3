"""Test-session wiring shared by unit and integration tests.

Tests run against their own state dir and port range (so a `make up` stack on the default
ports is never touched) but reuse the jars that setup resolved. Integration fixtures start
each real component once per session, or reuse one already running on the test ports.
"""

from __future__ import annotations

import os

from lambdalake.settings import isolated_environment

TEST_ENVIRONMENT = {
    **isolated_environment("test", slot=1),
    "LAMBDALAKE_SPARK__SHUFFLE_PARTITIONS": "2",
    # the session's own SparkSession runs the tests' batch code in-process; the stacks of
    # test_platform and test_batch_dag run their tasks on the Spark Connect server instead
    "LAMBDALAKE_SPARK__BATCH_TASKS": "driver",
}
for key, value in TEST_ENVIRONMENT.items():
    os.environ.setdefault(key, value)
