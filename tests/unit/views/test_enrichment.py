"""Which members a join's keys changed after a moment: from the lake's history (delta-rs)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
from deltalake import write_deltalake

from lambdalake.lake.reference import HISTORY_TABLE
from lambdalake.views.definition import UNKNOWN_MEMBER, Join
from lambdalake.views.enrichment import members_changed_after
from tests.support.settings_factory import MakeSettings

MOMENT = datetime(2026, 11, 24, 10, tzinfo=UTC)
LONG_AGO = MOMENT - timedelta(days=1)
JOIN = Join(entity="product", key="product_id", attributes=["category"])


def test_members_of_keys_changed_after_the_moment_with_those_keys_unknown_for_gaps(
    tmp_path: Path, make_settings: MakeSettings,
) -> None:
    settings = make_settings()
    later = [MOMENT + timedelta(minutes=m) for m in range(4)]
    versions = [  # key, valid_from, valid_to, category
        ("same", LONG_AGO, None, "books"),                          # no change at all
        ("before", LONG_AGO, MOMENT - timedelta(minutes=1), "toys"),  # changed before only
        ("before", MOMENT - timedelta(minutes=1), None, "grocery"),
        ("recategorised", LONG_AGO, later[1], "fashion"),
        ("recategorised", later[1], None, "garden"),
        ("deleted", LONG_AGO, later[2], "electronics"),
        ("created", later[3], None, "toys"),
    ]
    write_deltalake(settings.table_path(HISTORY_TABLE), pa.table({
        "entity": ["product"] * len(versions) + ["user_profile"],
        "entity_key": [v[0] for v in versions] + ["u"],
        "valid_from": pa.array([v[1] for v in versions] + [later[0]], pa.timestamp("us", "UTC")),
        "valid_to": pa.array([v[2] for v in versions] + [None], pa.timestamp("us", "UTC")),
        "category": [v[3] for v in versions] + [None],
    }), partition_by=["entity"])
    assert members_changed_after(settings, JOIN, MOMENT) == {
        ("fashion",): {"recategorised"}, ("garden",): {"recategorised"},
        ("electronics",): {"deleted"}, ("toys",): {"created"},
        (UNKNOWN_MEMBER,): {"deleted", "created"}}
    assert members_changed_after(settings, JOIN, later[3]) == {}
    assert members_changed_after(make_settings(state_dir=tmp_path / "none"), JOIN, MOMENT) == {}
