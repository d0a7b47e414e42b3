"""Hopping windows' ground truth, by what a window is rather than by how a layer assigns
events to windows: the window starting at ``w`` holds the events with ``w <= t < w +
grain``, for every ``w`` a whole number of slides after the epoch."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

HOPPING = {
    "name": "orders_rolling", "description": "orders per currency, an hour every 15 minutes",
    "event_types": ["purchase"], "grain": "1 hour", "slide": "15 minutes",
    "lateness": "10 minutes", "dimensions": ["currency"],
    "measures": [
        {"name": "orders", "kind": "count"},
        {"name": "revenue", "kind": "sum", "column": "amount"},
        {"name": "largest", "kind": "max", "column": "amount"},
        {"name": "average", "kind": "avg", "column": "amount"},
        {"name": "bulk_orders", "kind": "count", "filter": "quantity >= 3"},
    ],
}
"""A hopping view over the purchases: every kind of combination (count, sum, extreme,
moments) and a measure filter."""


def hopping_truth(events: list[dict[str, Any]], start: datetime, end: datetime,
                  grain: timedelta = timedelta(hours=1), slide: timedelta = timedelta(minutes=15),
                  ) -> dict[tuple[datetime, str | None], dict[str, Any]]:
    """``HOPPING``'s rows for the windows starting in [start, end) (both a whole number of
    slides after the epoch): per (window start, currency), each measure of the purchases in
    the window, in plain Python."""
    epoch = datetime.fromtimestamp(0, UTC)
    assert (start - epoch) % slide == timedelta(0) == (end - epoch) % slide
    grouped: dict[tuple[datetime, str | None], list[dict[str, Any]]] = defaultdict(list)
    window = start
    while window < end:
        for event in events:
            if event["event_type"] == "purchase" and window <= event["occurred_at"] < window + grain:
                grouped[(window, event["currency"])].append(event)
        window += slide
    truth = {}
    for key, purchases in grouped.items():
        amounts = [Decimal(str(e["amount"])) for e in purchases if e["amount"] is not None]
        truth[key] = {
            "orders": len(purchases),
            "revenue": sum(amounts) if amounts else None,
            "largest": max(amounts) if amounts else None,
            "average": float(sum(amounts) / len(amounts)) if amounts else None,
            "bulk_orders": sum(1 for e in purchases
                               if e["quantity"] is not None and e["quantity"] >= 3),
        }
    return truth
