"""Speed shards: who owns which partitions, where each keeps its state, and the speed
layer's status as the slowest shard's."""

from __future__ import annotations

from pathlib import Path

import pytest

from lambdalake.serving.freshness import speed_fields
from lambdalake.settings import Settings
from lambdalake.speed.shards import (
    APP,
    Shard,
    check_shard_layout,
    shard_count_of,
    shards,
    speed_status,
)
from lambdalake.speed.supervisor import check_health
from lambdalake.streaming.progress import write_status
from tests.support.settings_factory import MakeSettings


@pytest.fixture
def settings(make_settings: MakeSettings) -> Settings:
    """The unit tier's settings with two speed shards, for every test here that takes them."""
    return make_settings(speed={"shards": 2})


def test_shards_split_the_partitions_and_name_their_own_state() -> None:
    first, second = Shard(0, 2), Shard(1, 2)
    assert (first.partitions(6), second.partitions(6)) == ([0, 2, 4], [1, 3, 5])
    assert (first.app, second.app) == ("speed-0", "speed-1")
    assert second.checkpoint("speed_late_600s") == "speed_late_600s-shard-1-of-2"
    assert shard_count_of(second.checkpoint("speed_late_600s")) == 2
    with pytest.raises(ValueError, match="3 speed shards need at least 3 partitions"):
        Shard(0, 3).partitions(2)


def test_one_shard_keeps_the_names_it_always_had() -> None:
    (only,) = shards(Settings(speed={"shards": 1}))
    assert (only.app, only.checkpoint("speed_late_600s"), only.assigned) == (
        APP, "speed_late_600s", False)
    assert only.partitions(3) == [0, 1, 2]
    assert shard_count_of("speed_late_600s") == 1


def test_checkpoints_of_another_number_of_shards_are_refused(settings: Settings) -> None:
    first = shards(settings)[0]
    root = Path(settings.checkpoint_path(""))
    (root / first.checkpoint("speed_late_600s")).mkdir(parents=True)
    check_shard_layout(settings, first)  # its own layout
    (root / "speed_late_600s").mkdir()  # left by a speed layer of one shard
    with pytest.raises(RuntimeError, match=r"speed_late_600s are of another number of shards.*"
                                           r"lambdalake speed reset"):
        check_shard_layout(settings, first)


def view_entry(batch_timestamp: str, watermark: str, lag: int, dropped: int,
               offsets: dict[str, int]) -> dict:
    return {"query": "speed_late_600s", "active": True, "error": None, "written_at": 100.0,
            "batch_id": 7, "batch_timestamp": batch_timestamp, "watermark": watermark,
            "input_rows": 10, "input_rows_per_second": 5.0, "processed_rows_per_second": 6.0,
            "lag": lag, "state_rows": 1000, "dropped_by_watermark_total": dropped,
            "batch_duration_ms": 900, "end_offsets": offsets, "latest_offsets": offsets,
            "lag_per_partition": dict.fromkeys(offsets, 0)}


def test_the_speed_layers_status_is_its_slowest_shards_with_the_sums(settings: Settings) -> None:
    first = view_entry("2026-11-26T10:00:05.000Z", "2026-11-26T09:50:00.000Z", 3, 2, {"t:0": 5})
    second = view_entry("2026-11-26T10:00:02.000Z", "2026-11-26T09:51:00.000Z", 4, 1, {"t:1": 9})
    first |= {"dropped_by_window": {"2026-11-26T08:00:00.000Z": 2},
              "complete_from": "2026-11-19T09:50:00.000Z"}
    second |= {"dropped_by_window": {"2026-11-26T08:00:00.000Z": 1},
               "complete_from": "2026-11-19T09:51:00.000Z"}
    for app, entry in (("speed-0", first), ("speed-1", second)):
        write_status(settings, app, {"app": app, "pid": 1, "written_at": 100.0, "active": True,
                                     "views": {"page_traffic": entry},
                                     "reference": {"entities": {}, "stale_joins": 1}})
    status = speed_status(settings)
    merged = status["views"]["page_traffic"]
    assert (merged["batch_timestamp"], merged["watermark"]) == (
        "2026-11-26T10:00:02.000Z", "2026-11-26T09:50:00.000Z")  # each from the slowest
    assert (merged["lag"], merged["dropped_by_watermark_total"], merged["state_rows"]) == (
        7, 3, 2000)
    assert merged["end_offsets"] == {"t:0": 5, "t:1": 9}
    assert merged["dropped_by_window"] == {"2026-11-26T08:00:00.000Z": 3}
    assert merged["complete_from"] == "2026-11-19T09:51:00.000Z", "whole only where all are"
    assert merged["shards"]["speed-1"]["watermark"] == "2026-11-26T09:51:00.000Z"
    assert status["active"] is True and status["reference"]["stale_joins"] == 2
    shown = speed_fields(merged)  # what /freshness shows of the view's speed layer
    assert (shown["watermark"], shown["shards"]["speed-1"]["lag"]) == (
        "2026-11-26T09:50:00.000Z", 4)
    assert "shards" not in speed_fields(first), "one shard's entry shows no shards"


def test_a_shard_without_status_leaves_the_speed_layer_inactive_and_unhealthy(
    settings: Settings,
) -> None:
    entry = view_entry("2026-11-26T10:00:05.000Z", "2026-11-26T09:50:00.000Z", 0, 0, {"t:0": 5})
    write_status(settings, "speed-0", {"app": "speed-0", "pid": 1, "written_at": 100.0,
                                       "active": True, "views": {"page_traffic": entry}})
    status = speed_status(settings)
    assert status["active"] is False
    assert status["views"]["page_traffic"]["watermark"] is None, "no shard closed a window alone"
    assert status["views"]["page_traffic"]["complete_from"] is None
    health = check_health(settings, now=101.0)
    assert "not running: speed-0, speed-1" in health.problems
