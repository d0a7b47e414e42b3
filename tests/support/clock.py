"""Event times for traffic that goes through Kafka.

Kafka stamps each record with the time it is produced, and ingest quarantines an event whose
time lies more than ``ingest.max_event_age_days`` before that stamp (or
``ingest.max_future_skew_seconds`` after it), so such traffic is placed relative to the
moment the test runs, never at a fixed date. ``tests/repo/test_fixed_dates.py`` keeps it so.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


def hours_ago(hours: int) -> datetime:
    """The start of the UTC hour ``hours`` before the current one (aligned to the views'
    hourly grain, so a window's slice covers whole hours of the traffic)."""
    return datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=hours)
