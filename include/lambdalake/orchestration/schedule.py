"""The batch DAG's timetable: Airflow's delta data-interval timetable, whose intervals are
counted from the schedule's first day, and whose run triggered by hand gets the last whole
interval that ended by its logical date.

Airflow's own delta timetable gives a run triggered from the form (logical date "now",
*Inferred from Logical Date and Timetable*) the ``delta`` ending at that moment, such as
[18:50, 19:50) for an hourly schedule: no view slice is aligned to it, so the run would have
to compute another interval than its page shows. Here Airflow infers the interval the run
computes, and the run page, the REST API and the run's tasks all see the same one.
(Airflow registers this class through the plugin ``plugins/lambdalake_schedule.py``.)
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk.timezone import coerce_datetime
from airflow.timetables.base import DataInterval
from airflow.timetables.interval import DeltaDataIntervalTimetable

if TYPE_CHECKING:
    from pendulum import DateTime


_UNITS = (("day", 86_400), ("hour", 3_600), ("minute", 60), ("second", 1))


class BatchIntervals(DeltaDataIntervalTimetable):
    """Intervals of ``delta`` from ``anchor`` (the first day's midnight, UTC)."""

    def __init__(self, delta: timedelta, anchor: datetime) -> None:
        if delta <= timedelta(0):
            raise ValueError(f"the batch interval must be positive, not {delta}")
        if anchor.tzinfo is None:
            raise ValueError(f"the anchor must be timezone-aware, not {anchor}")
        super().__init__(delta)
        self.delta = delta
        self.anchor = anchor.astimezone(UTC)

    @property
    def summary(self) -> str:
        seconds = int(self.delta.total_seconds())
        count, unit = next((seconds // size, unit) for unit, size in _UNITS if seconds % size == 0)
        return f"every {count} {unit}{'s' * (count != 1)} from {self.anchor:%Y-%m-%d %H:%M} UTC"

    def infer_manual_data_interval(self, run_after: DateTime) -> DataInterval:
        """The last whole interval that ended by ``run_after`` (the form's logical date)."""
        end = self.last_boundary(run_after)
        return DataInterval(start=self._get_prev(end), end=end)

    def _round(self, dt: DateTime, anchor: DateTime) -> DateTime:
        """Boundaries from the first day, for scheduling with catch-up off as well."""
        return self.last_boundary(dt)

    def last_boundary(self, moment: datetime) -> DateTime:
        """The newest interval boundary at or before ``moment``."""
        def micros(at: datetime) -> int:  # whole numbers: Airflow passes pendulum times
            return round(at.timestamp() * 1_000_000)

        step = self.delta // timedelta(microseconds=1)
        elapsed = micros(moment) - micros(self.anchor)  # floored: before the anchor too
        return coerce_datetime(self.anchor + timedelta(microseconds=elapsed // step * step))

    def serialize(self) -> dict[str, Any]:
        return {**super().serialize(), "anchor": self.anchor.isoformat()}

    @classmethod
    def deserialize(cls, data: dict[str, Any]) -> BatchIntervals:
        return cls(timedelta(seconds=data["delta"]), datetime.fromisoformat(data["anchor"]))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BatchIntervals):
            return NotImplemented
        return (self.delta, self.anchor) == (other.delta, other.anchor)

    def __hash__(self) -> int:
        return hash((self.delta, self.anchor))
