"""Test-session wiring shared by every tier.

The tiers: ``tests/unit`` (no services), ``tests/repo`` (the repository's own files agree:
README, pins, compose, the tests' dates), ``tests/integration/<layer>/`` (real components,
one of each per session: ``tests/support/stacks.py``) and ``tests/e2e`` (whole stacks as
`make up` runs them). Tests run against their own state dir and port range (so a `make up`
stack on the default ports is never touched) but reuse the jars that setup resolved.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lambdalake.settings import isolated_environment

pytest_plugins = ["tests.support.stacks", "tests.support.figures"]
TIER_MARKERS = {"integration": [pytest.mark.integration],
                "e2e": [pytest.mark.integration, pytest.mark.e2e]}

TEST_ENVIRONMENT = {
    **isolated_environment("test", slot=1),
    "LAMBDALAKE_SPARK__SHUFFLE_PARTITIONS": "2",
    # the session's own SparkSession runs the tests' batch code in-process; the stacks of
    # test_platform and test_batch_dag run their tasks on the Spark Connect server instead
    "LAMBDALAKE_SPARK__BATCH_TASKS": "driver",
}
for key, value in TEST_ENVIRONMENT.items():
    os.environ.setdefault(key, value)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the integration tier's tests ``integration``, the end-to-end tier's both
    ``integration`` (they talk to real components too) and ``e2e``."""
    tests = Path(__file__).parent
    for item in items:
        tier = item.path.relative_to(tests).parts[0] if item.path.is_relative_to(tests) else ""
        for marker in TIER_MARKERS.get(tier, []):
            item.add_marker(marker)
