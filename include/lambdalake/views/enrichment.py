"""Reference data on a view's events: the joins a view declares, in Spark and on Arrow.

The batch layer joins *as of event time*: each event gets the version of the entity that
was valid when the event happened (``reference_history``'s ``[valid_from, valid_to)``), so
recomputing an interval gives the same answer however late it runs, as long as the
entity's changes are not themselves backdated. An event whose key has no version at its
time (never known, not yet created, or deleted) gets ``UNKNOWN_MEMBER`` for each
attribute: it is never dropped and never a silent null, and the view counts it under that
member.

The speed layer joins *as of processing time* (``as_of_now``): each micro-batch's events
get the attributes the entity has when the batch is processed (the current state the
speed layer keeps from the compacted topics), with the same unknown member. The two
answers differ where a key changed within a window: an event before the change counts
under the old attribute in the batch layer and under the new one in the speed layer if it
was processed after the change: ``members_changed_after`` names the members such a
difference can touch, which reconciliation reports as explained, not as failures.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from lambdalake.lake.reference import versions_changing_after
from lambdalake.settings import Settings
from lambdalake.views.definition import UNKNOWN_MEMBER, Join, ViewDefinition

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

Versions = Callable[[Join], "DataFrame"]
"""The versions of a join's entity: ``entity_key``, ``valid_from``, ``valid_to`` and the
join's attributes."""


def as_of_event_time(events: DataFrame, view: ViewDefinition, versions: Versions,
                     during: tuple[datetime, datetime] | None = None) -> DataFrame:
    """``events`` with the attributes of every join of ``view``, each from the entity version
    valid at the event's ``view.event_time``. ``during``: the events' time range [start, end),
    if known (an interval the batch layer computes): only the versions valid in it are
    joined, usually one per key, however long the history."""
    from pyspark.sql import functions as F

    when = F.col(view.event_time)
    for number, join in enumerate(view.joins):
        key, start, end = (f"_join{number}_{name}" for name in ("key", "from", "to"))
        candidates = versions(join)
        if during is not None:
            candidates = candidates.where(
                (F.col("valid_from") < F.lit(during[1]))
                & (F.col("valid_to").isNull() | (F.col("valid_to") > F.lit(during[0]))))
        valid = candidates.select(
            F.col("entity_key").alias(key), F.col("valid_from").alias(start),
            F.col("valid_to").alias(end), *join.attributes)
        matches = ((F.col(join.key) == F.col(key)) & (F.col(start) <= when)
                   & (F.col(end).isNull() | (when < F.col(end))))
        events = (events.join(F.broadcast(valid), matches, "left").drop(key, start, end)
                  .withColumns({attribute: F.coalesce(F.col(attribute), F.lit(UNKNOWN_MEMBER))
                                for attribute in join.attributes}))
    return events


CurrentAttributes = Callable[[Join, list[str | None]], dict[str, list[str | None]]]
"""The attributes of a join's entity for each key, as they are now (None: no such key)."""


def as_of_now(events: pa.Table, view: ViewDefinition, current: CurrentAttributes) -> pa.Table:
    """``events`` (Arrow) with the attributes of every join of ``view`` as ``current`` has
    them now; a key without them gets the unknown member."""
    import pyarrow as pa

    for join in view.joins:
        found = current(join, events.column(join.key).to_pylist())
        for attribute in join.attributes:
            values = [UNKNOWN_MEMBER if v is None else v for v in found[attribute]]
            events = events.append_column(attribute, pa.array(values, pa.string()))
    return events


def members_changed_after(settings: Settings, join: Join, moment: datetime
                          ) -> dict[tuple[str, ...], set[str]]:
    """Per value of ``join``'s attributes (a tuple per version; all ``UNKNOWN_MEMBER`` for
    a key that had none for a while), the keys changing after ``moment`` that held it from
    it on. An event after ``moment`` counts under one of them as of its time (batch) and
    may count under another as of processing (speed layer); every other member agrees.
    The keys say how far such an explanation reaches (reconciliation reports them)."""
    members: dict[tuple[str, ...], set[str]] = {}
    versions: dict[str, list[dict[str, Any]]] = {}
    for row in versions_changing_after(settings, join.entity, join.attributes, moment):
        key = str(row["entity_key"])
        members.setdefault(tuple(str(row[a]) for a in join.attributes), set()).add(key)
        versions.setdefault(key, []).append(row)
    for key, timeline in versions.items():
        timeline.sort(key=lambda row: row["valid_from"])
        gaps = [timeline[0]["valid_from"] > moment,
                timeline[-1]["valid_to"] is not None,
                *(before["valid_to"] != after["valid_from"]
                  for before, after in zip(timeline, timeline[1:], strict=False))]
        if any(gaps):
            members.setdefault((UNKNOWN_MEMBER,) * len(join.attributes), set()).add(key)
    return members
