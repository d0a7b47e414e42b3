"""The speed layer's deduplication and lateness (``SeenEvents``), on small Arrow batches."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest

from lambdalake.speed.dedup import SeenEvents, state_directory
from lambdalake.views.definition import ViewDefinition, load_views

START = datetime(2026, 11, 24, 10, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


@pytest.fixture
def views() -> list[ViewDefinition]:
    return list(load_views().values())  # page_traffic, product_sales, funnel: 10 minutes late


def batch(*events: tuple[str, str, datetime]) -> pa.Table:
    """(event_id, event_type, occurred_at) rows, as a speed micro-batch collects them."""
    ids, types, times = zip(*events, strict=True) if events else ((), (), ())
    return pa.table({"event_id": pa.array(ids, pa.string()),
                     "event_type": pa.array(types, pa.string()),
                     "occurred_at": pa.array(times, pa.timestamp("us", tz="UTC"))})


def run(seen: SeenEvents, batch_id: int, events: pa.Table) -> list[str]:
    """One micro-batch through ``seen``: the ids it counts."""
    admission = seen.admit(events, batch_id)
    seen.record(admission)
    return admission.events.column("event_id").to_pylist()


def test_an_event_counts_once_within_and_across_micro_batches(
    tmp_path: Path, views: list[ViewDefinition]
) -> None:
    seen = SeenEvents(tmp_path, views)
    assert run(seen, 0, batch(("a", "page_view", START), ("b", "purchase", START),
                              ("a", "page_view", START))) == ["a", "b"]
    assert run(seen, 1, batch(("b", "purchase", START), ("c", "page_view", START))) == ["c"]
    assert seen.status()["state_rows"] == 3


def test_rows_at_or_before_the_watermark_are_late_and_counted_per_view(
    tmp_path: Path, views: list[ViewDefinition]
) -> None:
    seen = SeenEvents(tmp_path, views)
    assert run(seen, 0, batch(("new", "page_view", START + 20 * MINUTE))) == ["new"]
    # the watermark is now START + 10 minutes: at or before it is late
    counted = run(seen, 1, batch(("on", "page_view", START + 10 * MINUTE),
                                 ("before", "purchase", START),
                                 ("after", "purchase", START + 10 * MINUTE + timedelta(
                                     milliseconds=1))))
    assert counted == ["after"]
    status = seen.status()
    assert status["watermark"] == "2026-11-24T10:10:00.000Z"
    # page_traffic reads page views, product_sales purchases, funnel both (and carts)
    assert status["dropped_by_watermark_total"] == {"page_traffic": 1, "product_sales": 1,
                                                    "funnel": 2}


def test_a_replayed_batch_counts_what_its_first_attempt_counted(
    tmp_path: Path, views: list[ViewDefinition]
) -> None:
    first = batch(("a", "page_view", START), ("b", "page_view", START))
    second = batch(("b", "page_view", START), ("c", "page_view", START + 20 * MINUTE),
                   ("late", "page_view", START - 20 * MINUTE))
    seen = SeenEvents(tmp_path, views)
    run(seen, 0, first)
    assert run(seen, 1, second) == ["c"]  # then a crash before Spark committed batch 1
    replayed = SeenEvents(tmp_path, views)
    assert run(replayed, 1, second) == ["c"]
    assert replayed.status() == seen.status(), "the replay's late rows count once"
    crashed_earlier = SeenEvents(tmp_path, views)  # batch 0 was the last one committed
    assert run(crashed_earlier, 1, second) == ["c"]
    assert run(crashed_earlier, 2, batch(("c", "page_view", START + 20 * MINUTE))) == []


def test_ids_are_forgotten_once_the_watermark_passes_their_batch(
    tmp_path: Path, views: list[ViewDefinition]
) -> None:
    seen = SeenEvents(tmp_path, views)
    for minute in range(30):  # a batch per minute of event time, two events each
        run(seen, minute, batch((f"{minute}a", "page_view", START + minute * MINUTE),
                                (f"{minute}b", "page_view", START + minute * MINUTE)))
    # newest: minute 29, watermark: minute 19; batches 0..19 are passed
    assert seen.status()["state_rows"] == 2 * 10
    # batch 29 moved the watermark past batch 19: its file goes once batch 29 is committed
    assert sorted(int(p.stem) for p in tmp_path.iterdir()) == list(range(19, 30))
    assert run(seen, 30, batch(("0a", "page_view", START))) == [], "late, not counted again"
    assert sorted(int(p.stem) for p in tmp_path.iterdir()) == list(range(20, 31))
    assert run(SeenEvents(tmp_path, views), 31, batch(("25a", "page_view", START + 25 * MINUTE),
                                                      ("new", "page_view", START))) == []
    only_late = SeenEvents(tmp_path, views)
    run(only_late, 32, batch(("x", "page_view", START)))
    assert only_late.status()["dropped_by_watermark_total"]["page_traffic"] == 3


def test_an_empty_micro_batch_changes_nothing(tmp_path: Path, views: list[ViewDefinition]) -> None:
    seen = SeenEvents(tmp_path, views)
    run(seen, 0, batch(("a", "page_view", START)))
    before = seen.status()
    assert run(seen, 1, batch()) == []
    assert seen.status() == before
    assert [p.name for p in tmp_path.iterdir()] == ["000000000000.arrow"]


def test_the_state_lives_beside_a_local_checkpoint(tmp_path: Path) -> None:
    assert state_directory(str(tmp_path / "speed")) == tmp_path / "speed" / "seen"
    assert state_directory(f"file://{tmp_path}/speed") == tmp_path / "speed" / "seen"
    with pytest.raises(ValueError, match="local checkpoint root"):
        state_directory("s3a://bucket/checkpoints/speed")
