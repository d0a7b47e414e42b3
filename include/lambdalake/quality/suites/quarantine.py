"""``quarantine_suite`` (rows of ``quarantine_events`` whose Kafka time is in [start, end):
    a malformed record may have no event time, so the slice is by arrival): the columns
    exist, the Kafka coordinates and the reason are not null, the coordinates are unique (a
    record is quarantined once), the reason is one ingest gives (``QUARANTINE_REASONS``),
    the Kafka time is in [start, end); and, as a warning, the *quarantine rate*: at most
    ``quality.quarantine_max_rate`` of the records that arrived in the interval (parameter
    ``quarantine_max_rows``, ``quarantine_max_rows(arrived, rate)``).
"""

from __future__ import annotations

import math

import great_expectations as gx  # the package's __init__ silenced GX analytics first

from lambdalake.lake.bronze import (
    QUARANTINE_COLUMNS,
    QUARANTINE_TABLE,
)
from lambdalake.quality.suites.common import (
    CRITICAL,
    INTERVAL_END,
    INTERVAL_START,
    KAFKA_COORDINATES,
    QUARANTINE_MAX_ROWS,
    WARNING,
    expect_on,
    new_suite,
)
from lambdalake.streaming.classification import QUARANTINE_REASONS

QUARANTINE_SUITE = QUARANTINE_TABLE


def quarantine_max_rows(arrived: int, max_rate: float) -> int:
    """The most quarantined records among ``arrived`` that keep the rate at ``max_rate``."""
    return math.floor(arrived * max_rate)


def quarantine_suite() -> gx.ExpectationSuite:
    """The suite of the records quarantined in an arrival interval (see the module docstring)."""
    coordinates_and_reason = [*KAFKA_COORDINATES, "kafka_timestamp", "quarantine_reason"]
    return new_suite(QUARANTINE_SUITE, [
        expect_on(gx.expectations.ExpectTableColumnsToMatchSet, "columns",
                "quarantine keeps each record's bytes, Kafka coordinates and time, and why it "
                "was refused", CRITICAL, column_set=list(QUARANTINE_COLUMNS), exact_match=True),
        *(expect_on(gx.expectations.ExpectColumnValuesToNotBeNull, f"not_null:{column}",
                  "every quarantined record says where it came from and why it was refused",
                  CRITICAL, column=column) for column in coordinates_and_reason),
        expect_on(gx.expectations.ExpectCompoundColumnsToBeUnique,
                "unique:" + ",".join(KAFKA_COORDINATES),
                "a Kafka record is quarantined exactly once (idempotent micro-batches)",
                CRITICAL, column_list=list(KAFKA_COORDINATES)),
        expect_on(gx.expectations.ExpectColumnValuesToBeInSet, "in_set:quarantine_reason",
                "the reason is one ingest gives", CRITICAL, column="quarantine_reason",
                value_set=list(QUARANTINE_REASONS)),
        expect_on(gx.expectations.ExpectColumnValuesToBeBetween, "in_interval:kafka_timestamp",
                "the slice holds the records that arrived in [start, end)", CRITICAL,
                column="kafka_timestamp", min_value={"$PARAMETER": INTERVAL_START},
                max_value={"$PARAMETER": INTERVAL_END}, strict_max=True),
        expect_on(gx.expectations.ExpectTableRowCountToBeBetween, "quarantine_rate",
                "at most quality.quarantine_max_rate of the records that arrived in the "
                "interval were quarantined (recorded only)", WARNING,
                max_value={"$PARAMETER": QUARANTINE_MAX_ROWS}),
    ])
