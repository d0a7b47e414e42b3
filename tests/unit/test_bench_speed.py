"""The speed benchmark's bookkeeping: which batch consumed a record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.speed import _batch_ends


def offset_log(checkpoint: Path, batches: dict[int, dict[str, int]]) -> None:
    """Spark's offset log: per batch a file of a version line, metadata and the offsets."""
    (checkpoint / "offsets").mkdir(parents=True)
    for batch, ends in batches.items():
        (checkpoint / "offsets" / str(batch)).write_text(
            f"v1\n{{}}\n{json.dumps({'topic': ends})}")


def test_each_partitions_batch_ends_are_read_in_order(tmp_path: Path) -> None:
    offset_log(tmp_path, {1: {"0": 9, "1": 4}, 0: {"0": 5, "1": 2}})
    (tmp_path / "offsets" / ".1.crc").write_text("")
    assert _batch_ends(tmp_path, "topic") == {0: [(5, 0), (9, 1)], 1: [(2, 0), (4, 1)]}


def test_a_purged_offset_log_is_refused(tmp_path: Path) -> None:
    """Records of purged batches would be charged to the first batch left: minutes late."""
    offset_log(tmp_path, {54: {"0": 900}, 55: {"0": 950}})
    with pytest.raises(RuntimeError, match="starts at batch 54"):
        _batch_ends(tmp_path, "topic")
