"""Views computed independently of Spark, with pandas: the ground truth tests compare with."""

from __future__ import annotations

import math
import numbers
import statistics
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any

import pandas as pd

from lambdalake.generator.traffic import Manifest, Record, TrafficGenerator, TrafficProfile
from lambdalake.views.definition import ViewDefinition


def percentile_disc(values: Sequence[Any], percentile: float) -> Any:
    """The smallest value whose cumulative share of ``values`` reaches ``percentile`` (SQL's
    ``percentile_disc``); None for no values."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(percentile * len(ordered)) - 1)] if ordered else None


def rank_admits(values: Sequence[Any], answer: float, percentile: float, error: float) -> bool:
    """Whether ``answer`` is a ``percentile`` of ``values`` within the rank ``error``: the
    share of values below it and the share up to it bracket the percentile, each give or
    take ``error``."""
    numbers = [float(value) for value in values]
    below = sum(value < answer for value in numbers) / len(numbers)
    up_to = sum(value <= answer for value in numbers) / len(numbers)
    return below - error <= percentile <= up_to + error


def _exact_sum(column: pd.Series) -> Any:
    present = column.dropna()
    if present.empty:
        return None  # SQL: the sum of no values
    return sum(present, Decimal(0)) if present.dtype == object else int(present.sum())


def _exact_statistic(statistic: Any, fewest: int) -> Any:
    """A statistic of a column's values, computed on exact fractions; None below ``fewest``."""
    def of(column: pd.Series) -> float | None:
        present = [Fraction(value) for value in column.dropna()]
        return float(statistic(present)) if len(present) >= fewest else None
    return of


MEASURES = {
    "count": len,
    "sum": _exact_sum,
    "max": lambda column: column.max(),
    "min": lambda column: column.min(),
    "distinct_count": lambda column: column.nunique(),
    "avg": _exact_statistic(statistics.mean, 1),
    "variance": _exact_statistic(statistics.variance, 2),
    "stddev": _exact_statistic(lambda v: math.sqrt(statistics.variance(v)), 2),
}
"""Each measure kind's exact value of a group's column (``approx_percentile``: its
``percentile_disc``, and the values, for checking a sketch's rank error)."""

ORDERED_KINDS = {"first": (False, 1), "last": (True, 1), "first_k": (False, None),
                 "last_k": (True, None)}
"""The kinds that pick values by event order: newest first?, and how many (None: ``k``)."""
KAFKA_ORDER = ["kafka_timestamp", "topic", "partition", "offset"]


@dataclass(frozen=True)
class TiedOrder:
    """An ordered kind's truth where the events' Kafka order is not known (events from a
    generator's manifest): the chosen events' times, and each time's values. An answer is
    true if each of its values is one of an event of the time at its place, each event used
    once: the layers break ties by Kafka order, which only the broker knows."""

    times: tuple[Any, ...]
    values_at: dict[Any, tuple[Any, ...]]

    def admits(self, answer: Any, single: bool) -> bool:
        answers = [answer] if single else list(answer)
        if len(answers) != len(self.times):
            return False
        left = {time: [_exact(v) for v in values] for time, values in self.values_at.items()}
        for time, value in zip(self.times, answers, strict=True):
            if _exact(value) not in left[time]:
                return False
            left[time].remove(_exact(value))
        return True


def ordered_truth(kind: str, values: pd.DataFrame, column: str, k: int | None) -> Any:
    """An ordered kind's exact value of a group's rows (``values``, with ``occurred_at``):
    by event time, ties broken by Kafka order where the rows have it; a ``TiedOrder``
    where they do not and times tie."""
    newest, count = ORDERED_KINDS[kind]
    count = count or k
    present = values[values[column].notna()]
    known = all(c in present.columns for c in KAFKA_ORDER)
    order = ["occurred_at", *(KAFKA_ORDER if known else [])]
    ranked = present.sort_values(order, ascending=not newest, kind="stable")
    chosen = ranked.head(count)
    single = ORDERED_KINDS[kind][1] == 1
    events_at = present["occurred_at"].value_counts()
    if known or (events_at[chosen["occurred_at"]] == 1).all():  # no tie to break
        picked = list(chosen[column])
        return (picked[0] if picked else None) if single else picked
    times = tuple(chosen["occurred_at"])
    return TiedOrder(times, {time: tuple(present.loc[present["occurred_at"] == time, column])
                             for time in set(times)})


def top_k_truth(column: pd.Series, k: int) -> list[dict[str, Any]]:
    """A ``top_k``'s exact value of a group's column: the ``k`` values counted most, most
    first, equal counts by value (Python orders text by code point, as Spark orders UTF-8)."""
    ranked = sorted(Counter(column.dropna()).items(), key=lambda counted: (-counted[1], counted[0]))
    return [{"value": value, "count": count} for value, count in ranked[:k]]


def top_k_admits(counts: dict[str, int], answer: Sequence[Any], k: int, error: float) -> bool:
    """Whether ``answer`` is a top-k of values counted ``counts`` within the frequent-items
    sketch's guarantee (each count off by at most ``error`` times all the values counted):
    in the kind's order, at most k distinct values, each counted within the tolerance, and
    every value left out counted at most the tolerance above the answer's k-th count (above
    0 if it lists fewer than k)."""
    tolerance = error * sum(counts.values())
    listed = [(chosen["value"], int(chosen["count"])) for chosen in answer]
    names = {value for value, _ in listed}
    floor = listed[-1][1] if len(listed) == k else 0
    return (listed == sorted(listed, key=lambda counted: (-counted[1], counted[0]))
            and len(names) == len(listed) <= k
            and all(abs(count - counts.get(value, 0)) <= tolerance for value, count in listed)
            and all(count <= floor + tolerance
                    for value, count in counts.items() if value not in names))


DOUBLE_KINDS = ("avg", "variance", "stddev")
"""The kinds whose values are doubles that both layers sum in an order of their own."""


def same_value(kind: str, truth: Any, answer: Any, relative: float = 1e-10) -> bool:
    """Whether a layer's ``answer`` is the exact ``truth`` of a measure of ``kind``: equal,
    or for a double a layer added up in its own order, within ``relative`` of its size (the
    speed layer states 1e-9)."""
    if isinstance(truth, TiedOrder):
        return truth.admits(answer, single=ORDERED_KINDS[kind][1] == 1)
    if kind in ("first_k", "last_k"):
        return [_exact(v) for v in truth] == [_exact(v) for v in answer]
    if kind == "top_k":  # a list of {value, count}: Spark's rows, Arrow's or JSON's dicts
        return [(c["value"], int(c["count"])) for c in truth] == [
            (c["value"], int(c["count"])) for c in answer]
    if _missing(truth) or _missing(answer):
        return _missing(truth) and _missing(answer)
    if kind in DOUBLE_KINDS:
        return math.isclose(float(answer), float(truth), rel_tol=relative, abs_tol=relative)
    return bool(_exact(answer) == _exact(truth))


def _exact(value: Any) -> Any:
    """A value as compared with another layer's: numbers exactly, as decimals (the API
    answers a decimal as its text); instants as naive UTC; other text as it is."""
    if isinstance(value, numbers.Number) and not isinstance(value, bool):
        return Decimal(str(value))
    if isinstance(value, str):
        try:
            return Decimal(value)
        except InvalidOperation:
            return value
    if isinstance(value, datetime | pd.Timestamp):
        moment = pd.Timestamp(value)
        return (moment.tz_convert("UTC").tz_localize(None) if moment.tzinfo else moment)
    return value


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def row_key(view: ViewDefinition, row: dict[str, Any]) -> tuple[Any, ...]:
    """A view row's key as the truth and a layer's rows are matched: the window's start as
    a naive UTC instant, the dimensions as text."""
    start = pd.Timestamp(row["window_start"])
    start = start.tz_convert("UTC").tz_localize(None) if start.tzinfo else start
    return (start.to_pydatetime(), *(str(row[d]) for d in view.dimensions))


def row_differences(view: ViewDefinition, truth: pd.DataFrame | list[dict[str, Any]],
                    rows: pd.DataFrame | list[dict[str, Any]]) -> dict[tuple[Any, ...], str]:
    """Where an exact layer's ``rows`` differ from the ``truth``, by key (``row_key``): a key
    on one side only, or measures that are not the ``same_value``."""
    def keyed(frame: pd.DataFrame | list[dict[str, Any]]) -> dict[tuple[Any, ...], dict]:
        records = frame.to_dict("records") if isinstance(frame, pd.DataFrame) else frame
        return {row_key(view, row): row for row in records}

    want, got = keyed(truth), keyed(rows)
    differences = dict.fromkeys(want.keys() - got.keys(), "not in the rows")
    differences |= dict.fromkeys(got.keys() - want.keys(), "in the rows, not in the truth")
    for key in want.keys() & got.keys():
        wrong = [f"{m.name}: {got[key][m.name]}, truth {want[key][m.name]}"
                 for m in view.measures
                 if not same_value(m.kind, want[key][m.name], got[key][m.name])]
        if wrong:
            differences[key] = "; ".join(wrong)
    return differences


def with_expressions(events: pd.DataFrame, view: ViewDefinition) -> pd.DataFrame:
    """``events`` with the view's derived columns, those its filter holds for, and a flag
    ``_counted_<measure>`` per measure filter: the definition's SQL evaluated by DuckDB, an
    engine of its own, on the columns typed as the contracts say."""
    import duckdb

    from lambdalake.contracts.registry import ContractRegistry

    contracts = ContractRegistry()
    types = {name: rule.spark_type for event_type in view.event_types
             for name, rule in contracts.latest(event_type).fields.items()}
    frame = events.reset_index(drop=True).assign(_row=lambda f: range(len(f)))
    decimals = [c for c in frame.columns if types.get(c, "").startswith("DECIMAL")]
    source = frame.assign(**{c: frame[c].map(lambda v: None if pd.isna(v) else str(v))
                             for c in decimals})
    typed = ", ".join(f'CAST("{c}" AS {types[c]}) AS "{c}"' for c in decimals)
    query = f"SELECT * REPLACE ({typed}) FROM source" if decimals else "SELECT * FROM source"
    for name, text in view.columns.items():
        query = f'SELECT *, ({text}) AS "{name}" FROM ({query})'
    if view.filter:
        query = f"SELECT * FROM ({query}) WHERE ({view.filter})"
    selected = ["_row", *(f'"{name}"' for name in view.columns),
                *(f'COALESCE(({m.filter}), FALSE) AS "_counted_{m.name}"'
                  for m in view.measures if m.filter)]
    query = f"SELECT {', '.join(selected)} FROM ({query})"
    connection = duckdb.connect()
    connection.register("source", source)
    computed = connection.sql(query).to_arrow_table().to_pandas()
    return frame.merge(computed, on="_row").drop(columns="_row")


def expected_view(events: pd.DataFrame, view: ViewDefinition, start: datetime, end: datetime
                  ) -> pd.DataFrame:
    """The view over distinct ``events`` (``occurred_at`` naive UTC): windows, group, measure;
    a percentile measure also has its group's values in ``<name>__values``, a top-k measure
    each value's count in ``<name>__counts``."""
    events = events[events["event_type"].isin(view.event_types)].copy()
    if view.expressions_text:
        events = with_expressions(events, view)
    newest = events["occurred_at"].dt.floor(f"{view.slide_seconds}s")  # hopping: every
    events = pd.concat([  # window an event counts in, a slide apart
        events.assign(window_start=newest - pd.Timedelta(seconds=hop * view.slide_seconds))
        for hop in range(view.windows_per_event)], ignore_index=True)
    events = events[(events["window_start"] >= start.replace(tzinfo=None))
                    & (events["window_start"] < end.replace(tzinfo=None))]
    rows = []
    for key, group in events.groupby(["window_start", *view.dimensions]):
        row = dict(zip(["window_start", *view.dimensions], key, strict=True))
        for m in view.measures:
            values = group if not m.event_types else group[group["event_type"].isin(m.event_types)]
            if m.filter:
                values = values[values[f"_counted_{m.name}"]]
            column = values[m.column] if m.column else values["event_id"]
            if m.kind == "approx_percentile":
                present = [float(value) for value in column.dropna()]
                row[m.name] = percentile_disc(present, m.percentile)
                row[f"{m.name}__values"] = present
            elif m.kind == "top_k":
                row[m.name] = top_k_truth(column, m.k)
                row[f"{m.name}__counts"] = dict(Counter(column.dropna()))
            elif m.kind in ORDERED_KINDS:
                row[m.name] = ordered_truth(m.kind, values, m.column, m.k)
            else:
                row[m.name] = MEASURES[m.kind](column)
        rows.append(row)
    return pd.DataFrame(rows)


def bounds_as_of_processing(events: pd.DataFrame, view: ViewDefinition,
                            candidates: list[list[set[tuple[str, ...]]]], start: datetime,
                            end: datetime) -> pd.DataFrame:
    """What the speed layer may answer for a view with joins, whose attributes are those of
    processing time: for each window and dimensions, each measure's lowest (``<m>__low``:
    the events that can only count there) and highest value (``<m>__high``: every event that
    may count there), and ``certain`` (some event can only count there). ``candidates``: per
    join (``processing_time_candidates``), per event, the attribute values it may get.
    Counts, sums of non-negative columns and distinct counts are bounded so."""
    options = []  # per event, every combination of its joins' candidate values
    for number in range(len(events)):
        combos: list[tuple[str, ...]] = [()]
        for per_event in candidates:
            combos = [c + value for c in combos for value in sorted(per_event[number])]
        options.append(combos)
    exploded = events.assign(_combo=options, _certain=[len(c) == 1 for c in options]
                             ).explode("_combo", ignore_index=True)
    for position, column in enumerate(view.joined_columns):
        exploded[column] = exploded["_combo"].str[position]
    possible = expected_view(exploded, view, start, end)
    certain = expected_view(exploded[exploded["_certain"]], view, start, end)
    key = ["window_start", *view.dimensions]
    bounds = possible.merge(certain, on=key, how="left", suffixes=("__high", "__low"),
                            indicator=True)
    bounds["certain"] = bounds.pop("_merge") == "both"
    for m in view.measures:
        if m.kind not in ("count", "sum", "distinct_count"):
            raise NotImplementedError(f"{m.name}: no processing-time bounds for {m.kind}")
        if m.kind == "sum" and (exploded[m.column].dropna() < 0).any():
            raise NotImplementedError(f"{m.name}: a sum of negative values is not bounded")
        bounds[f"{m.name}__low"] = bounds[f"{m.name}__low"].fillna(0)
    return bounds


ANY_MEMBER = "*"


def totals_over_joins(events: pd.DataFrame, view: ViewDefinition, start: datetime,
                      end: datetime) -> pd.DataFrame:
    """The view with every joined attribute ``ANY_MEMBER``: per window and other dimension,
    what the joined attributes' rows add up to, whichever member each event joined."""
    return expected_view(events.assign(**dict.fromkeys(view.joined_columns, ANY_MEMBER)),
                         view, start, end)


def first_copies(bronze: pd.DataFrame) -> pd.DataFrame:
    """One row per ``event_id``: the copy that reached Kafka first, as the layers keep it."""
    return bronze.sort_values(["partition", "offset"]).drop_duplicates("event_id")


def manifest_records(manifest: Manifest) -> Iterator[Record]:
    """The records a generator run produced, regenerated from its manifest."""
    profile: dict[str, Any] = dict(manifest.profile)
    if profile.get("start_time"):
        profile["start_time"] = datetime.fromisoformat(str(profile["start_time"]))
    avro = (lambda event: b"") if profile.get("wire_format") == "avro" else None  # events only
    return TrafficGenerator(TrafficProfile(**profile), avro=avro).records()


def manifest_events(manifest: Manifest) -> pd.DataFrame:
    """Every distinct valid event a generator run produced, regenerated from its manifest,
    with its place in the run's records (``record_index``)."""
    events = pd.DataFrame([{**r.event, "record_index": index}
                           for index, r in enumerate(manifest_records(manifest))
                           if r.kind == "valid"])
    events["occurred_at"] = pd.to_datetime(events["occurred_at"], utc=True).dt.tz_localize(None)
    assert events["event_id"].is_unique and len(events) == len(manifest.valid_event_ids)
    return events
