"""Reference data's history computed from a generator manifest, without Spark: what the
lake's ``reference_history`` and ``reference_current`` must hold."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from lambdalake.catalogue import REFERENCE_MALFORMED_KINDS
from lambdalake.views.definition import UNKNOWN_MEMBER


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


def as_of(versions: list[Version], entity: str, key: str, moment: datetime,
          attribute: str) -> str:
    """The attribute of ``key``'s version valid at ``moment``, or the unknown member."""
    for version in versions:
        if (version.entity, version.key) == (entity, key) and version.valid_from <= moment and (
                version.valid_to is None or moment < version.valid_to):
            return str(version.value[attribute])
    return UNKNOWN_MEMBER
