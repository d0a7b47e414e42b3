"""Reference data computed from generator manifests, without Spark: what the lake's
``reference_history`` and ``reference_current`` must hold, and the attributes each layer's
join gives an event (as of event time in batch; the values possible as of processing time
in the speed layer)."""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pandas as pd

from lambdalake.generator.catalogue import REFERENCE_MALFORMED_KINDS
from lambdalake.generator.traffic import Manifest
from lambdalake.views.definition import UNKNOWN_MEMBER, Join, ViewDefinition


@dataclass(frozen=True)
class Version:
    entity: str
    key: str
    value: dict[str, Any]
    valid_from: datetime
    valid_to: datetime | None


def expected_history(changes: list[dict[str, Any]]) -> list[Version]:
    """Each key's versions: its well-formed changes in time order (production order breaks
    ties), a version ending where the next change of the key begins; deletions end one and
    are none; a version superseded at the instant it began never was."""
    by_key: dict[tuple[str, str], list[tuple[datetime, int, dict[str, Any] | None]]] = (
        defaultdict(list))
    for order, change in enumerate(changes):
        if change["kind"] not in REFERENCE_MALFORMED_KINDS:
            by_key[(change["entity"], change["key"])].append(
                (datetime.fromisoformat(change["updated_at"]), order, change["value"]))
    versions = []
    for (entity, key), timeline in by_key.items():
        timeline.sort(key=lambda item: item[:2])
        for (start, _, value), following in zip(timeline, [*timeline[1:], None], strict=True):
            end = following[0] if following else None
            if value is not None and (end is None or end > start):
                versions.append(Version(entity, key, value, start, end))
    return versions


def expected_quarantine(changes: list[dict[str, Any]]) -> dict[str, int]:
    reasons: dict[str, int] = defaultdict(int)
    for change in changes:
        if change["kind"] in REFERENCE_MALFORMED_KINDS:
            reasons[change["kind"]] += 1
    return dict(reasons)


class Timelines:
    """Each key's versions in time order, for as-of lookups without scanning them all."""

    def __init__(self, versions: list[Version]) -> None:
        self.versions: dict[tuple[str, str], list[Version]] = defaultdict(list)
        for version in sorted(versions, key=lambda v: v.valid_from):
            self.versions[(version.entity, version.key)].append(version)
        self.starts = {key: [v.valid_from for v in timeline]
                       for key, timeline in self.versions.items()}

    def as_of(self, entity: str, key: str, moment: datetime, attribute: str) -> str:
        """The attribute of ``key``'s version valid at ``moment``, or the unknown member."""
        timeline = self.versions.get((entity, key), [])
        at = bisect_right(self.starts.get((entity, key), []), moment) - 1
        if at < 0 or (timeline[at].valid_to is not None and moment >= timeline[at].valid_to):
            return UNKNOWN_MEMBER
        return str(timeline[at].value[attribute])


def reference_changes(manifests: list[Manifest]) -> list[dict[str, Any]]:
    """Every reference change of generator runs, in production order."""
    return [change for manifest in manifests for change in manifest.reference_changes]


def with_attributes_as_of_event_time(events: pd.DataFrame, view: ViewDefinition,
                                     changes: list[dict[str, Any]]) -> pd.DataFrame:
    """``events`` (``occurred_at`` naive UTC) with the view's joined attributes as the batch
    layer joins them: the version valid at each event's time."""
    timelines = Timelines(expected_history(changes))
    events = events.copy()
    for join in view.joins:
        moments = [moment.to_pydatetime().replace(tzinfo=UTC) for moment in events["occurred_at"]]
        for attribute in join.attributes:
            events[attribute] = [
                timelines.as_of(join.entity, key, moment, attribute) if isinstance(key, str)
                else UNKNOWN_MEMBER
                for key, moment in zip(events[join.key], moments, strict=True)]
    return events


def processing_time_candidates(
    events: pd.DataFrame, join: Join, runs: list[list[dict[str, Any]]], run_of_events: int
) -> list[set[tuple[str, ...]]]:
    """For each of ``events`` (of run ``run_of_events``, with their ``record_index``), every
    value ``join``'s attributes can have in the speed layer, which joins as of processing
    time: at least every change sent before the event (the generator has each acknowledged
    before it sends the next record, and a micro-batch catches up with the topics before it
    joins), at most every change of that run and the runs before it (a run's events are
    processed before the next run produces). ``runs``: each run's manifest changes, in
    production order."""
    sequence: dict[str, list[tuple[int, int, tuple[str, ...]]]] = defaultdict(list)
    for number, changes in enumerate(runs[:run_of_events + 1]):
        for change in changes:
            if change["entity"] != join.entity or change["kind"] in REFERENCE_MALFORMED_KINDS:
                continue
            value = change["value"]
            state = ((UNKNOWN_MEMBER,) * len(join.attributes) if value is None
                     else tuple(str(value[a]) for a in join.attributes))
            sequence[change["key"]].append((number, change["after_record"], state))
    unknown = (UNKNOWN_MEMBER,) * len(join.attributes)
    candidates = []
    for key, record in zip(events[join.key], events["record_index"], strict=True):
        timeline = sequence.get(key, []) if isinstance(key, str) else []
        sent_before = sum((number, after) < (run_of_events, record)
                          for number, after, _ in timeline)
        states = [unknown, *(state for _, _, state in timeline)]
        candidates.append(set(states[sent_before:]))
    return candidates
