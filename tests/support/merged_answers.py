"""The query API's merged answer, read page by page at one high-water mark, and how it
differs from a ground truth computed with pandas."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import httpx
import pandas as pd
from datasketches import frequent_strings_sketch

from lambdalake.views.definition import ViewDefinition
from tests.support.ground_truth import ANY_MEMBER, rank_admits, same_value, top_k_admits

READS = 10  # of a whole answer, each at one high-water mark: a batch run publishes rarely


def merged_answer(base_url: str, view: str, start: datetime, end: datetime
                  ) -> tuple[list[dict[str, Any]], datetime]:
    """Every row for windows starting in [start, end), page by page, all pages read at one
    high-water mark (a scheduled batch run may publish meanwhile: then read again); the mark."""
    for _ in range(READS):
        rows: list[dict[str, Any]] = []
        marks: set[str] = set()
        offset: int | None = 0
        while offset is not None:
            page = httpx.get(f"{base_url}/views/{view}/rows", timeout=30, params={
                "from": start.isoformat(), "to": end.isoformat(), "limit": 1000,
                "offset": offset}).json()
            rows += page["rows"]
            marks.add(page["snapshot"]["high_water_mark"])
            offset = page["next_offset"]
        if len(marks) == 1:
            return rows, window(marks.pop())
    raise AssertionError(f"{view}: the high-water mark moved during each of {READS} reads")


def sql_answer(base_url: str, view: ViewDefinition, start: datetime, end: datetime
               ) -> tuple[list[dict[str, Any]], datetime]:
    """The same rows asked for in SQL (``POST /sql``), in one answer read at one snapshot;
    its high-water mark."""
    answer = httpx.post(f"{base_url}/sql", timeout=60, json={"sql": (
        f"SELECT * FROM {view.name} WHERE window_start >= '{start.isoformat()}' "
        f"AND window_start < '{end.isoformat()}' "
        f"ORDER BY {', '.join(['window_start', *view.dimensions])}")})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert not body["truncated"], f"{view.name}: more rows than one SQL answer holds"
    return body["rows"], window(body["views"][view.name]["high_water_mark"])


def window(value: Any) -> datetime:
    moment = pd.Timestamp(value)
    return (moment.tz_convert(UTC) if moment.tzinfo else moment.tz_localize(UTC)).to_pydatetime()


def disagreements(view: ViewDefinition, rows: list[dict[str, Any]], mark: datetime,
                  truth: pd.DataFrame) -> list[str]:
    """Where the API's answer differs from the ground truth. Rows come from batch before the
    mark and real-time after it; exact measures equal the truth, the speed layer's distinct
    counts are within 4 rsd (``distinct_tolerance``), its percentiles within their rank
    error (``quantile_rank_error``) and its top-k counts within the frequent-items sketch's
    a-priori error (DataSketches' own figure for the view's ``top_k_lg_map_size``)."""
    def key(row: dict[str, Any]) -> tuple[Any, ...]:
        return (window(row["window_start"]), *(str(row[d]) for d in view.dimensions))

    expected = {key(row): row for row in truth.to_dict("records")}
    answered = {key(row): row for row in rows}
    problems = [f"{k}: {row['source']} row on the wrong side of {mark}"
                for k, row in answered.items() if (k[0] < mark) != (row["source"] == "batch")]
    problems += [f"{k}: not in the answer" for k in expected.keys() - answered.keys()]
    problems += [f"{k}: answered but not in the truth" for k in answered.keys() - expected.keys()]
    for k in expected.keys() & answered.keys():
        row = answered[k]
        realtime = row["source"] == "realtime"
        for m in view.measures:
            if realtime and m.kind == "approx_percentile":  # a KLL sketch: within its rank error
                if not rank_admits(expected[k][f"{m.name}__values"], float(row[m.name]),
                                   m.percentile, view.quantile_rank_error):
                    problems.append(f"{k} {m.name}: {row[m.name]} from realtime is not the "
                                    f"p{m.percentile} within {view.quantile_rank_error:.4f}")
                continue
            if realtime and m.kind == "top_k":  # a frequent-items sketch: within its error
                error = frequent_strings_sketch.get_epsilon_for_lg_size(view.top_k_lg_map_size)
                if not top_k_admits(expected[k][f"{m.name}__counts"], row[m.name], m.k, error):
                    problems.append(f"{k} {m.name}: {row[m.name]} from realtime is not a top "
                                    f"{m.k} within {error:.4f} of the values counted")
                continue
            want, got = expected[k][m.name], row[m.name]
            if realtime and m.kind == "distinct_count":  # a HyperLogLog sketch: within 4 rsd
                agrees = abs(Decimal(str(got)) - Decimal(str(want))) <= view.distinct_tolerance(
                    float(want), 4)
            else:  # the speed layer states 1e-9 for a mean or a spread
                agrees = same_value(m.kind, want, got, relative=1e-9 if realtime else 1e-10)
            if not agrees:
                problems.append(f"{k} {m.name}: {got} from {row['source']}, truth {want}")
    return problems


def bounded_disagreements(view: ViewDefinition, rows: list[dict[str, Any]],
                          bounds: pd.DataFrame, totals: pd.DataFrame) -> list[str]:
    """Where the speed layer's rows of a view with joins (as of processing time) leave the
    ``bounds`` (``bounds_as_of_processing``), or their counts and sums over the joined
    attributes differ from ``totals`` (``totals_over_joins``): a join moves an event between
    members, it never drops one or counts it twice."""
    def key(row: dict[str, Any]) -> tuple[Any, ...]:
        return (window(row["window_start"]), *(str(row[d]) for d in view.dimensions))

    expected = {key(row): row for row in bounds.to_dict("records")}
    answered = {key(row): row for row in rows}
    problems = [f"{k}: answered, but no event may count there"
                for k in answered.keys() - expected.keys()]
    problems += [f"{k}: not in the answer, though events count only there"
                 for k, row in expected.items() if row["certain"] and k not in answered]
    for k in expected.keys() & answered.keys():
        for m in view.measures:
            low = Decimal(str(expected[k][f"{m.name}__low"]))
            high = Decimal(str(expected[k][f"{m.name}__high"]))
            tolerance = Decimal(0 if m.exact_in_speed_layer else view.distinct_tolerance(
                float(high), 4))
            got = Decimal(str(answered[k][m.name]))
            if not low - tolerance <= got <= high + tolerance:
                problems.append(f"{k} {m.name}: {got} from realtime, truth in [{low}, {high}]")
    joined = set(view.joined_columns)
    others = [i for i, d in enumerate(view.dimensions) if d not in joined]
    added: dict[tuple[Any, ...], dict[str, Decimal]] = {}
    for k, row in answered.items():
        total = added.setdefault((k[0], *(k[1 + i] for i in others)), {})
        for m in view.measures:
            total[m.name] = total.get(m.name, Decimal(0)) + Decimal(str(row[m.name]))
    for row in totals.to_dict("records"):
        k = (window(row["window_start"]), *(str(row[view.dimensions[i]]) for i in others))
        for m in view.measures:
            if m.kind in ("count", "sum"):
                got = added.get(k, {}).get(m.name, Decimal(0))
                if got != Decimal(str(row[m.name])):
                    problems.append(f"{k} {m.name}: {got} over every {ANY_MEMBER} member "
                                    f"from realtime, truth {row[m.name]}")
    return problems
