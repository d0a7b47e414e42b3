"""Which physical table holds each view, and the atomic switch between versions.

A view's rows live in ``view_<name>_v<N>``. A full reprocess builds version N+1 beside the
current one, validates it, and then *switches*: one append to the catalog table. Readers
resolve the current table once per read, so they see the old version or the new one, never
a mix; the old version stays readable (and is kept) until the switch and after it.

>>> current_table_path(settings, "page_traffic")        # doctest: +SKIP
'.state/lake/view_page_traffic_v1'
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from lambdalake.lake.delta_rs import append_rows, read_rows
from lambdalake.settings import Settings

CATALOG_TABLE = "view_catalog"
FIRST_VERSION = 1
_SCHEMA = pa.schema([
    pa.field("view", pa.string(), nullable=False),
    pa.field("version", pa.int64(), nullable=False),
    pa.field("run_id", pa.string(), nullable=False),
    pa.field("switched_at", pa.timestamp("us", tz="UTC"), nullable=False),
])


def physical_table(view_name: str, version: int) -> str:
    return f"view_{view_name}_v{version}"


def current_version(settings: Settings, view_name: str) -> int:
    """The version readers use: the latest switch, or the first version if none happened."""
    return version_of(read_catalog(settings), view_name)


def read_catalog(settings: Settings) -> list[dict[str, Any]]:
    """Every switch recorded in the catalog (none before the first switch)."""
    return read_rows(settings.table_path(CATALOG_TABLE), _SCHEMA)


def version_of(switches: list[dict[str, Any]], view_name: str) -> int:
    """The current version of ``view_name`` given the catalog's rows."""
    mine = [r for r in switches if r["view"] == view_name]
    if not mine:
        return FIRST_VERSION
    return int(max(mine, key=lambda r: r["switched_at"])["version"])


def version_before(switches: list[dict[str, Any]], view_name: str) -> int | None:
    """The version readers used before the newest switch of ``view_name`` (None: never
    switched)."""
    mine = sorted((r for r in switches if r["view"] == view_name),
                  key=lambda r: r["switched_at"])
    if not mine:
        return None
    return int(mine[-2]["version"]) if len(mine) > 1 else FIRST_VERSION


def current_table_path(settings: Settings, view_name: str) -> str:
    return settings.table_path(physical_table(view_name, current_version(settings, view_name)))


def switch_version(settings: Settings, view_name: str, version: int, run_id: str) -> None:
    """Make ``version`` the one readers see, in one Delta commit."""
    append_rows(settings.table_path(CATALOG_TABLE), _SCHEMA, [{
        "view": view_name, "version": version, "run_id": run_id,
        "switched_at": datetime.now(UTC),
    }])
