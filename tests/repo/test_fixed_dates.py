"""The suite's outcome does not depend on the day it runs: no test produces fixed-date
traffic through Kafka, and every fixed date in an integration test says why it is safe
(the rules: ``tests/support/dated_traffic.py``)."""

from pathlib import Path

from tests.support.dated_traffic import checked_modules, producing_test_modules, unjustified_dates

RED_ON_2026_11_30 = '''
from datetime import UTC, datetime
from lambdalake.kafka.producer import EventProducer

START = datetime(2026, 11, 23, 6, 0, tzinfo=UTC)
RENAMED = {"updated_at": "2026-11-23T07:00:00.000Z"}
'''


def test_no_integration_test_writes_an_unjustified_fixed_date() -> None:
    found = [str(fixed) for path in checked_modules() for fixed in unjustified_dates(path)]
    assert found == [], (
        "place traffic through Kafka relative to now (tests/support/clock.py), or say with "
        "'# fixed date: <why>' why no age or now comparison reaches the date")


def test_the_rules_catch_the_test_that_turned_ci_red(tmp_path: Path) -> None:
    module = tmp_path / "test_dated.py"
    module.write_text(RED_ON_2026_11_30)
    assert [fixed.line for fixed in unjustified_dates(module)] == [5, 6]
    module.write_text(RED_ON_2026_11_30.replace(
        "tzinfo=UTC)", "tzinfo=UTC)  # fixed date: only ever compared with itself").replace(
        "from lambdalake.kafka.producer import EventProducer", ""))
    assert unjustified_dates(module) == []


def test_the_date_sensitive_modules_are_found() -> None:
    names = {path.name for path in producing_test_modules()}
    assert {"test_reference_ingest.py", "test_bronze_reconciliation.py", "test_platform.py",
            "test_speed_layer.py", "test_ingest_crash_recovery.py"} <= names
    assert "test_recompute.py" not in names  # builds its Kafka rows itself, timestamps given
