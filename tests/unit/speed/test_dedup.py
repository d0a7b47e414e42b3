"""The speed layer's deduplication and lateness (``SeenEvents``), on small Arrow batches."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest

from lambdalake.speed.dedup import SeenEvents, StateMissingError, state_directory
from lambdalake.views.definition import ViewDefinition, load_views

START = datetime(2026, 11, 24, 10, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
HOUR = timedelta(hours=1)


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
    assert status["dropped_by_watermark_total"] == {
        "page_traffic": 1, "page_traffic_by_segment": 1, "page_traffic_rolling": 1,
        "product_sales": 1,
        "product_sales_by_category": 1, "order_value": 1, "funnel": 2}


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
    assert crashed_earlier.status() == seen.status(), "restored before the first batch runs"
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


def test_late_rows_are_counted_per_view_and_window_within_the_horizon(
    tmp_path: Path, views: list[ViewDefinition]
) -> None:
    seen = SeenEvents(tmp_path, views, horizon=2 * HOUR)
    run(seen, 0, batch(("new", "page_view", START + 3 * HOUR)))
    # watermark START + 2:50; late counts kept for windows ending after START + 0:50
    run(seen, 1, batch(("a", "page_view", START + 5 * MINUTE),
                       ("a", "page_view", START + 5 * MINUTE),  # a copy: a late row too
                       ("b", "purchase", START + 2 * HOUR + MINUTE),
                       ("old", "page_view", START - 3 * HOUR)))
    status = seen.status()
    assert status["dropped_by_watermark_total"]["page_traffic"] == 3
    assert status["dropped_by_window"]["page_traffic"] == {"2026-11-24T10:00:00.000Z": 2}
    assert status["dropped_by_window"]["product_sales"] == {"2026-11-24T12:00:00.000Z": 1}
    assert status["dropped_by_window"]["funnel"] == {"2026-11-24T10:00:00.000Z": 2,
                                                     "2026-11-24T12:00:00.000Z": 1}
    assert status["complete_from"] == "2026-11-24T10:50:00.000Z"
    assert SeenEvents(tmp_path, views, horizon=2 * HOUR).status() == status, "restored"
    run(seen, 2, batch(("newer", "page_view", START + 4 * HOUR)))  # watermark START + 3:50
    status = seen.status()
    assert "page_traffic" not in status["dropped_by_window"], "10:00 ended before the horizon"
    assert status["dropped_by_window"]["funnel"] == {"2026-11-24T12:00:00.000Z": 1}
    assert status["complete_from"] == "2026-11-24T11:50:00.000Z"


def test_a_late_row_counts_once_in_the_total_and_in_each_hopping_window_it_is_in(
    tmp_path: Path, views: list[ViewDefinition]
) -> None:
    rolling = ViewDefinition.model_validate({
        "name": "rolling", "description": "page views, an hour every 20 minutes",
        "event_types": ["page_view"], "grain": "1 hour", "slide": "20 minutes",
        "lateness": "10 minutes", "dimensions": [], "measures": [{"name": "n", "kind": "count"}]})
    seen = SeenEvents(tmp_path, [*views, rolling])
    run(seen, 0, batch(("new", "page_view", START + 3 * HOUR)))
    run(seen, 1, batch(("a", "page_view", START + 25 * MINUTE)))  # late: in 09:40, 10:00, 10:20
    status = seen.status()
    assert status["dropped_by_watermark_total"]["rolling"] == 1
    assert status["dropped_by_window"]["rolling"] == {
        "2026-11-24T09:40:00.000Z": 1, "2026-11-24T10:00:00.000Z": 1,
        "2026-11-24T10:20:00.000Z": 1}
    assert status["dropped_by_window"]["page_traffic"] == {"2026-11-24T10:00:00.000Z": 1}


def test_a_query_started_at_the_newest_offset_is_whole_only_from_its_first_event(
    tmp_path: Path, views: list[ViewDefinition]
) -> None:
    seen = SeenEvents(tmp_path, views, counts_from_start=True)
    assert seen.status()["complete_from"] is None
    run(seen, 0, batch(("a", "page_view", START + HOUR), ("b", "page_view", START + 30 * MINUTE)))
    run(seen, 1, batch(("c", "page_view", START + 55 * MINUTE)))  # in time, but not first
    assert seen.status()["complete_from"] == "2026-11-24T10:30:00.000Z"
    restarted = SeenEvents(tmp_path, views, counts_from_start=True)
    assert restarted.status()["complete_from"] == "2026-11-24T10:30:00.000Z"
    assert SeenEvents(tmp_path, views).status()["complete_from"] is None, (
        "read from the topic's start, it missed nothing before its first batch")


def test_a_producer_clock_ahead_moves_the_watermark_no_further_than_the_bound(
    tmp_path: Path, views: list[ViewDefinition]
) -> None:
    now = START + 5 * HOUR  # the wall clock; one producer's clock runs an hour ahead

    def seen_with_bound() -> SeenEvents:
        return SeenEvents(tmp_path, views, clock_bound=5 * MINUTE, clock=lambda: now)

    seen = seen_with_bound()
    assert run(seen, 0, batch(("ahead", "page_view", now + HOUR),
                              ("on-time", "page_view", now - MINUTE))) == ["ahead", "on-time"]
    assert seen.status()["watermark"] == "2026-11-24T14:55:00.000Z"  # now + 5 min - 10 min
    assert run(seen, 1, batch(("on-time-2", "page_view", now - 4 * MINUTE),
                              ("ahead", "page_view", now + HOUR))) == ["on-time-2"], (
        "on-time events still count, and the copy of the event ahead is still known")
    assert seen.status()["dropped_by_watermark_total"]["page_traffic"] == 0
    restarted = seen_with_bound()
    assert restarted.status()["watermark"] == "2026-11-24T14:55:00.000Z"
    assert run(restarted, 2, batch(("ahead", "page_view", now + HOUR))) == []
    unbounded = SeenEvents(tmp_path / "unbounded", views)
    run(unbounded, 0, batch(("ahead", "page_view", now + HOUR)))
    assert run(unbounded, 1, batch(("on-time", "page_view", now - MINUTE))) == [], (
        "without the bound, the producer ahead makes on-time events late")


def test_an_empty_micro_batch_changes_nothing(tmp_path: Path, views: list[ViewDefinition]) -> None:
    seen = SeenEvents(tmp_path, views)
    run(seen, 0, batch(("a", "page_view", START)))
    before = seen.status()
    assert run(seen, 1, batch()) == []
    assert seen.status() == before
    assert [p.name for p in tmp_path.iterdir()] == ["000000000000.arrow"]


def random_stream(rng: random.Random, batches: int) -> list[pa.Table]:
    """Micro-batches of 0-5 rows: new events up to 25 minutes late, and copies of earlier
    ones (30 %), event time advancing up to 4 minutes a row."""
    stream, now, sent = [], 0, []
    for index in range(batches):
        rows = []
        for row in range(rng.choice([0, 1, 2, 5])):
            now += rng.randint(0, 240)
            if sent and rng.random() < 0.3:
                rows.append(rng.choice(sent))
                continue
            event = (f"e{index}-{row}", rng.choice(["page_view", "add_to_cart", "purchase"]),
                     START + timedelta(seconds=now - rng.randint(0, 1500)))
            sent.append(event)
            rows.append(event)
        stream.append(batch(*rows))
    return stream


def counted_with_crashes(directory: Path, views: list[ViewDefinition], stream: list[pa.Table],
                         rng: random.Random | None) -> tuple[list[list[str]], dict]:
    """Run ``stream`` as Spark would, restarting the process at random points (``rng``):
    before a batch's state is recorded (maybe with a half-written file), after it (Spark
    replays the batch) or after Spark committed it. The ids each batch counted, and the
    final status."""
    seen, counted, index = SeenEvents(directory, views), {}, 0
    while index < len(stream):
        admission = seen.admit(stream[index], index)
        counted.setdefault(index, admission.events.column("event_id").to_pylist())
        assert admission.events.column("event_id").to_pylist() == counted[index], index
        crash = rng.random() if rng else 1.0
        if crash < 0.1:
            (directory / f"{index:012d}.tmp").write_bytes(b"cut short")
        if crash < 0.2:
            seen = SeenEvents(directory, views)
            continue
        seen.record(admission)
        if crash < 0.35:
            seen = SeenEvents(directory, views)  # not committed: batch ``index`` again
            continue
        index += 1
        if crash < 0.5:
            seen = SeenEvents(directory, views)
    return [counted[i] for i in range(len(stream))], seen.status()


def test_crashes_at_any_point_change_nothing_that_is_counted(
    tmp_path: Path, views: list[ViewDefinition]
) -> None:
    for seed in range(60):
        rng = random.Random(seed)
        stream = random_stream(rng, 40)
        expected = counted_with_crashes(tmp_path / f"{seed}-clean", views, stream, None)
        assert counted_with_crashes(tmp_path / f"{seed}", views, stream, rng) == expected, seed


def test_without_lateness_a_restart_keeps_the_newest_event_time(
    tmp_path: Path, views: list[ViewDefinition]
) -> None:
    """With no allowance the batch holding the newest event time passes its own watermark
    and is forgotten; the watermark must not move back when a replay restores."""
    no_allowance = [views[0].model_copy(update={"lateness": "0 seconds"})]
    seen = SeenEvents(tmp_path, no_allowance)
    run(seen, 0, batch(("a", "page_view", START + 40 * MINUTE)))
    run(seen, 1, batch(("b", "page_view", START - 10 * MINUTE)))  # late
    third = batch(("x", "page_view", START + 20 * MINUTE))
    assert run(seen, 2, third) == []  # batch 0's file is gone now, batch 2 not committed
    assert run(SeenEvents(tmp_path, no_allowance), 2, third) == []


def test_the_state_lives_in_the_checkpoint(tmp_path: Path, views: list[ViewDefinition]) -> None:
    assert state_directory(str(tmp_path / "speed")) == f"{tmp_path}/speed/seen"
    for location in (f"file://{tmp_path}/uri", f"file:{tmp_path}/short"):
        run(SeenEvents(state_directory(location), views), 0,
            batch(("a", "page_view", START)))
    assert (tmp_path / "uri" / "seen" / f"{0:012d}.arrow").is_file()
    assert (tmp_path / "short" / "seen" / f"{0:012d}.arrow").is_file()


def test_a_checkpoint_with_commits_but_no_state_is_refused(
    tmp_path: Path, views: list[ViewDefinition]
) -> None:
    (tmp_path / "speed" / "commits").mkdir(parents=True)  # as Spark's deduplication left it
    with pytest.raises(StateMissingError, match="lambdalake speed reset"):
        state_directory(str(tmp_path / "speed"))
    fresh = tmp_path / "fresh"
    SeenEvents(state_directory(str(fresh)), views)  # a new query: its state from the start
    (fresh / "commits").mkdir()
    assert state_directory(str(fresh)) == f"{fresh}/seen"
