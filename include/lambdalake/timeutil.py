"""Durations and UTC instants as the platform writes and reads them, defined once.

Settings, view definitions, the batch DAG's intervals, the query API and the streams'
progress reports all speak these two forms: a duration like ``1 hour`` and an ISO-8601
instant in UTC like ``2026-11-22T10:00:00Z``.

>>> duration_seconds("10 minutes")
600
>>> parse_utc("2026-11-22T10:00:00Z").isoformat()
'2026-11-22T10:00:00+00:00'
>>> iso_utc(parse_utc("2026-11-22T11:00:00+01:00"))
'2026-11-22T10:00:00Z'
"""

from __future__ import annotations

import argparse
import re
from datetime import UTC, datetime, timedelta

_DURATION = re.compile(r"^(?P<amount>\d+)\s*(?P<unit>second|minute|hour|day)s?$")
_UNIT_SECONDS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400}


def duration_seconds(text: str) -> int:
    """'1 hour' -> 3600; '10 minutes' -> 600."""
    match = _DURATION.match(text.strip())
    if not match:
        raise ValueError(f"{text!r} is not a duration like '1 hour' or '10 minutes'")
    return int(match["amount"]) * _UNIT_SECONDS[match["unit"]]


def parse_utc(text: str, *, naive_is_utc: bool = False) -> datetime:
    """An ISO-8601 instant (``Z`` or an offset) as an aware UTC datetime. An instant without
    an offset is refused, or read as UTC with ``naive_is_utc`` (a date means its midnight)."""
    moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    if moment.tzinfo is None and not naive_is_utc:
        raise ValueError(f"{text!r} has no time zone; write it like 2026-11-20T10:00:00Z")
    try:
        return as_utc(moment, naive_is_utc=True)
    except OverflowError:  # 0001-01-01T00:00+01:00 is in year 0 in UTC
        raise ValueError(f"{text!r} lies outside the years 1 to 9999 in UTC") from None


def utc_argument(text: str) -> datetime:
    """``parse_utc`` as an argparse type (the Spark entry points' ``--start`` and ``--end``):
    a value that is no instant with a time zone is a usage error that names it."""
    try:
        return parse_utc(text)
    except ValueError as error:
        if "no time zone" in str(error):
            raise argparse.ArgumentTypeError(
                f"{text!r}: give a time zone, e.g. 2026-11-20T10:00:00Z") from None
        raise argparse.ArgumentTypeError(f"{text!r} is not an ISO-8601 instant") from error


def as_utc(moment: datetime, *, naive_is_utc: bool = False) -> datetime:
    """``moment`` as an aware UTC datetime, by the rule ``parse_utc`` reads text with: a naive
    one is refused, or taken as UTC with ``naive_is_utc`` (as Spark's and Delta's timestamp
    columns hold it)."""
    if moment.tzinfo is None:
        if not naive_is_utc:
            raise ValueError(f"{moment} has no time zone: interval bounds must be "
                             "timezone-aware")
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def iso_utc(moment: datetime) -> str:
    """``moment`` to the second, in UTC, as the DAGs and entry points take it."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def epoch_microseconds(moment: datetime) -> int:
    """An aware instant as whole microseconds since the Unix epoch (Arrow's and Delta's unit)."""
    return (moment - EPOCH) // timedelta(microseconds=1)


def from_epoch_microseconds(microseconds: int) -> datetime:
    """The aware UTC instant ``microseconds`` after the Unix epoch."""
    return EPOCH + timedelta(microseconds=microseconds)
