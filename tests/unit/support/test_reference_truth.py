"""The ground truth of joins is itself checked on a small hand-made case: what the batch
layer must give each event, and the bounds the speed layer's answer must lie in."""

from __future__ import annotations

from datetime import datetime

import pandas as pd

from lambdalake.views.definition import UNKNOWN_MEMBER, load_views
from tests.support.ground_truth import bounds_as_of_processing, totals_over_joins
from tests.support.merged_answers import bounded_disagreements
from tests.support.reference_truth import (
    processing_time_candidates,
    with_attributes_as_of_event_time,
)

VIEW = load_views()["product_sales_by_category"]
JOIN = VIEW.joins[0]


def change(key: str, category: str | None, at: str, after_record: int,
           kind: str = "recategorisation") -> dict[str, object]:
    value = None if category is None else {"product_id": key, "category": category}
    return {"kind": kind, "entity": "product", "key": key, "value": value,
            "updated_at": f"2026-11-24T{at}:00.000Z", "after_record": after_record}


CHANGES = [change("p1", "books", "00:00", -1, "initial"),
           change("p2", "toys", "00:00", -1, "initial"),
           change("p1", "garden", "10:30", 5),
           change("p2", None, "10:40", 8, "product_deletion"),
           change("p1", "toys", "10:45", 9, "invalid_json")]  # malformed: never applies
EVENTS = pd.DataFrame({
    "event_type": ["purchase"] * 4, "product_id": ["p1", "p1", "p2", "p3"],
    "currency": ["EUR"] * 4, "quantity": [1, 2, 3, 4], "amount": [10, 20, 30, 40],
    "event_id": ["e0", "e1", "e2", "e3"], "record_index": [2, 7, 9, 3],
    "occurred_at": pd.to_datetime(["2026-11-24 10:20", "2026-11-24 10:20", "2026-11-24 10:35",
                                   "2026-11-24 10:50"]),
})
HOUR = (datetime.fromisoformat("2026-11-24T10:00:00+00:00"),
        datetime.fromisoformat("2026-11-24T11:00:00+00:00"))


def test_batch_joins_the_version_valid_at_each_event_s_time() -> None:
    joined = with_attributes_as_of_event_time(EVENTS, VIEW, CHANGES)
    assert list(joined["category"]) == ["books", "books", "toys", UNKNOWN_MEMBER]


def test_the_speed_layer_may_give_any_value_from_the_changes_sent_before_the_event_on() -> None:
    candidates = processing_time_candidates(EVENTS, JOIN, [CHANGES], 0)
    assert candidates == [{("books",), ("garden",)},  # sent before the change at record 5
                          {("garden",)},              # after it
                          {(UNKNOWN_MEMBER,)},        # after p2's deletion (record 8)
                          {(UNKNOWN_MEMBER,)}]        # p3 never existed


def test_speed_answers_inside_the_bounds_agree_and_others_do_not() -> None:
    candidates = [processing_time_candidates(EVENTS, JOIN, [CHANGES], 0)]
    bounds = bounds_as_of_processing(EVENTS, VIEW, candidates, *HOUR)
    totals = totals_over_joins(EVENTS, VIEW, *HOUR)

    # e0 under garden (processed after the change), e1 garden, e2 and e3 unknown
    late = [{"window_start": HOUR[0].isoformat(), "category": "garden", "currency": "EUR",
             "orders": 2, "units": 3, "revenue": 30, "source": "realtime"},
            {"window_start": HOUR[0].isoformat(), "category": UNKNOWN_MEMBER,
             "currency": "EUR", "orders": 2, "units": 7, "revenue": 70, "source": "realtime"}]
    assert bounded_disagreements(VIEW, late, bounds, totals) == []
    early = [{**late[0], "orders": 1, "units": 2, "revenue": 20},
             {**late[0], "category": "books", "orders": 1, "units": 1, "revenue": 10},
             late[1]]
    assert bounded_disagreements(VIEW, early, bounds, totals) == []
    lost = [late[0], {**late[1], "orders": 1, "units": 4, "revenue": 40}]  # e2 missing
    assert bounded_disagreements(VIEW, lost, bounds, totals) != []
    wrong = [{**late[0], "category": "toys"}, late[1]]  # toys: no event may count there
    assert any("no event may count there" in p
               for p in bounded_disagreements(VIEW, wrong, bounds, totals))
