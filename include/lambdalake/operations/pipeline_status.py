"""What the Pipeline status page shows, from what the platform already records.

Per view, the state ``/freshness`` answers (the query API holds it: the mark, what was
published beyond it, the speed layer's watermark, lag and late drops, the late rows
waiting) beside the view's last publish and each layer's last verdict; and over time:

- *batch freshness*: at each publish, how far the newest interval published so far
  ended before it (the publication log);
- *stream lag*: the records each micro-batch left in Kafka (the streams' batch histories);
- *serving drift*: the share of the keys a serving gate compared that drifted beyond
  their rule (its recorded outcomes);
- *quarantine rate by reason*: per hour of arrival, the records quarantined for each
  reason among all that arrived (the quarantine table and bronze, by Kafka time);
- *gate durations* per layer (the quality history) and *DAG run durations* (Airflow's).

The functions here only shape records into rows and series; the page reads them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from lambdalake.operations.charts import Series
from lambdalake.quality.report import per_subject, verdict
from lambdalake.timeutil import as_utc, parse_utc

VERDICT_LAYERS = ("batch", "realtime", "serving")
"""The layers whose gates judge one view (subject = the view's name)."""


@dataclass(frozen=True)
class ViewStatus:
    view: str
    freshness: dict[str, Any] | None  # the API's /freshness entry; None: it did not answer
    last_published: datetime | None
    verdicts: dict[str, dict[str, Any]]  # layer -> its newest data interval's result


def view_statuses(views: Iterable[str], freshness: dict[str, Any] | None,
                  publications: list[dict[str, Any]], results: list[dict[str, Any]],
                  ) -> list[ViewStatus]:
    """One row per view, in name order."""
    published: dict[str, datetime] = {}
    for row in publications:
        at = row["published_at"]
        published[row["view"]] = max(at, published.get(row["view"], at))
    verdicts: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for subject in per_subject(results):
        if subject.layer in VERDICT_LAYERS:
            verdicts[subject.subject][subject.layer] = subject.newest
    return [ViewStatus(view, None if freshness is None else freshness.get(view),
                       published.get(view), verdicts.get(view, {})) for view in sorted(views)]


def batch_freshness(publications: list[dict[str, Any]]) -> Series:
    """Per view, hours from the end of its newest published interval to each publish."""
    commits: dict[str, dict[datetime, datetime]] = defaultdict(dict)
    for row in publications:  # one publish commits its intervals at one published_at
        at, end = row["published_at"], row["interval_end"]
        commits[row["view"]][at] = max(end, commits[row["view"]].get(at, end))
    series: Series = {}
    for view, ends in commits.items():
        newest: datetime | None = None
        points = []
        for at in sorted(ends):
            newest = ends[at] if newest is None else max(newest, ends[at])
            points.append((at, max(0.0, (at - newest).total_seconds() / 3600)))
        series[view] = points
    return series


def stream_lag(batches: dict[str, list[dict[str, Any]]]) -> Series:
    """Per streaming query (of each app), the records left in Kafka after each batch
    (histories recorded before the lag was noted have no point)."""
    series: Series = defaultdict(list)
    for app, history in batches.items():
        for batch in history:
            if batch.get("lag") is not None:
                series[f"{app} {batch['query']}"].append(
                    (_moment(batch["timestamp"]), float(batch["lag"])))
    return dict(series)


def serving_drift(results: list[dict[str, Any]]) -> Series:
    """Per view, the percentage of compared keys a serving gate found drifted (failures,
    warnings and explained drifts alike) at each time it was recorded."""
    series: Series = defaultdict(list)
    for result in results:
        if result["layer"] != "serving" or not result["rows"]:
            continue
        drifted = sum(outcome.get("unexpected_count") or 0
                      for outcome in [*result["critical_failures"], *result["warnings"]]
                      if outcome["check"].startswith("drift:"))
        series[result["subject"]].append(
            (_moment(result["recorded_at"]), 100.0 * drifted / result["rows"]))
    return dict(series)


def quarantine_rate(quarantined: list[dict[str, Any]], since: datetime, until: datetime,
                    arrived: Callable[[datetime, datetime], int]) -> Series:
    """Per reason, per hour in [since, until): the percentage of the records that reached
    Kafka then that were quarantined for it. ``arrived(start, end)`` counts the valid
    records (bronze's); it is asked only for hours that quarantined any."""
    hours: dict[datetime, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for row in quarantined:
        hour = _hour(row["kafka_timestamp"])
        if since <= hour < until:
            hours[hour][row["quarantine_reason"]] += 1
    reasons = sorted({reason for counts in hours.values() for reason in counts})
    series: Series = {reason: [] for reason in reasons}
    hour = since
    while hour < until:
        counts = hours.get(hour, {})
        total = sum(counts.values()) + (arrived(hour, hour + timedelta(hours=1))
                                        if counts else 0)
        for reason in reasons:
            series[reason].append((hour, 100.0 * counts.get(reason, 0) / total if total else 0.0))
        hour += timedelta(hours=1)
    return series


def gate_durations(results: list[dict[str, Any]]) -> Series:
    """Per layer, the seconds each recorded validation took."""
    series: Series = defaultdict(list)
    for result in results:
        if result.get("seconds") is not None:
            series[result["layer"]].append((_moment(result["recorded_at"]),
                                            float(result["seconds"])))
    return dict(series)


def run_durations(runs: list[dict[str, Any]]) -> Series:
    """Per DAG, the minutes each finished run took, at its start."""
    series: Series = defaultdict(list)
    for run in runs:
        if run.get("start") is not None and run.get("end") is not None:
            series[run["dag_id"]].append(
                (run["start"], (run["end"] - run["start"]).total_seconds() / 60))
    return dict(series)


def verdict_text(result: dict[str, Any] | None) -> str:
    return "–" if result is None else verdict(result)


def _moment(value: str | datetime) -> datetime:
    if isinstance(value, datetime):
        return as_utc(value, naive_is_utc=True)
    return parse_utc(value, naive_is_utc=True)


def _hour(value: datetime) -> datetime:
    return _moment(value).replace(minute=0, second=0, microsecond=0)
