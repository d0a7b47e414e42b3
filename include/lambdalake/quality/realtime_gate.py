"""The real-time gate: validate the rows the speed layer wrote since the last gate, off-stream.

The speed layer must not slow down for quality checks, so this gate runs from the
supervisor DAG, never inside a micro-batch, and without Spark: the rows (partial
aggregates, one per key and micro-batch) are read with delta-rs (only those whose
``updated_at`` is newer than the last gated row, and at most ``max_rows`` of the newest),
their sketches are estimated, the suite's derived columns are computed by DuckDB from the
same SQL the Spark gates use, and GX validates the pandas frame (``realtime_suite``).

Each view remembers, per speed shard, the newest ``updated_at`` it gated in
``<state>/quality/realtime-gated.json``; the next gate starts after it, so every row is
gated once (``updated_at`` is the write time a shard stamps on its appends, one after the
other, so it grows with each shard's commits; across shards it need not, which is why the
mark is per shard; a gate that did not run keeps the marks, and the rows are gated next
time; rows written before shards existed are shard 0's). A
failed gate is recorded in the quality history like every other layer's and fails the
supervisor's task, which raises an alert; the rows stay (serving shows them, and the batch
layer supersedes them), because the real-time view is provisional by design.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lambdalake.contracts.registry import ContractRegistry
from lambdalake.jsonfile import replace_json
from lambdalake.quality.docs import record_with_pages
from lambdalake.quality.gate import SAMPLE_SIZE, run_suite_locally
from lambdalake.quality.suites.realtime import realtime_parameters, realtime_suite
from lambdalake.quality.verdict import GateResult, did_not_run
from lambdalake.settings import Settings
from lambdalake.speed.partials import with_estimates
from lambdalake.speed.realtime import RealtimeTable
from lambdalake.views.definition import ViewDefinition

if TYPE_CHECKING:
    import pyarrow as pa

LAYER = "realtime"
log = logging.getLogger(__name__)


def marks_path(settings: Settings) -> Path:
    return settings.state_dir / "quality" / "realtime-gated.json"


def _read_marks(settings: Settings) -> dict[str, Any]:
    try:
        return dict(json.loads(marks_path(settings).read_text()))
    except (FileNotFoundError, ValueError):
        return {}


def _write_marks(settings: Settings, marks: dict[str, Any]) -> None:
    replace_json(marks_path(settings), marks)


def gated_until(settings: Settings) -> dict[str, dict[int, datetime]]:
    """Per view and speed shard, the newest ``updated_at`` already gated (a mark from before
    shards, one stamp per view, is shard 0's)."""
    views = _read_marks(settings).get("views", {})
    return {view: {0: datetime.fromisoformat(marks)} if isinstance(marks, str)
            else {int(shard): datetime.fromisoformat(stamp) for shard, stamp in marks.items()}
            for view, marks in views.items()}


def _remember(settings: Settings, view: ViewDefinition, rows: pa.Table) -> None:
    """Move each shard's mark to the newest of its rows gated now."""
    import pyarrow.compute as pc

    marks = _read_marks(settings)
    views = marks.get("views", {})
    before = views.get(view.name, {})
    mine = {"0": before} if isinstance(before, str) else dict(before)  # from before shards
    for shard in pc.unique(rows.column("shard")).to_pylist():
        of_shard = rows.filter(pc.equal(rows.column("shard"), shard))
        mine[str(shard)] = pc.max(of_shard.column("updated_at")).as_py().isoformat()
    marks["views"] = {**views, view.name: mine}
    _write_marks(settings, marks)


def gates_due(settings: Settings, now: datetime) -> bool:
    """True when the last round of gates began ``speed.gate_every_seconds`` ago or more;
    if so, notes ``now`` as the start of a new round."""
    marks = _read_marks(settings)
    began = marks.get("round_began_at")
    if began is not None and (now - datetime.fromisoformat(began)).total_seconds() < (
            settings.speed.gate_every_seconds):
        return False
    _write_marks(settings, {**marks, "round_began_at": now.isoformat()})
    return True


def run_realtime_gates(
    settings: Settings, views: Iterable[ViewDefinition], *, now: datetime | None = None,
    **context: Any,
) -> list[GateResult] | None:
    """One round for the supervisor: gate each view's new rows and record every verdict
    (with ``context``, e.g. the run id) in the quality history. None when the round is not
    due (``speed.gate_every_seconds``); an empty list when no view had new rows."""
    now = now or datetime.now(UTC)
    if not gates_due(settings, now):
        return None
    results = []
    for view in views:
        result = validate_realtime(settings, view, now=now)
        if result is not None:
            record_with_pages([result], settings, **context)
            results.append(result)
    return results


def new_rows(settings: Settings, view: ViewDefinition, max_rows: int) -> pa.Table | None:
    """The real-time rows of ``view`` not gated yet, at most the newest ``max_rows`` (the
    task log says how many were left out), each row's distinct counts estimated from its
    sketches; None if there are none (or no table)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    marks = gated_until(settings).get(view.name, {})
    every_shard_marked = all(shard in marks for shard in range(settings.speed.shards))
    since = min(marks.values()) if marks and every_shard_marked else None
    rows = RealtimeTable(settings, view).partials(updated_after=since)
    if rows is None:
        return None
    if "shard" in rows.schema.names:  # rows written before shards have none: shard 0's
        rows = rows.set_column(rows.schema.get_field_index("shard"), "shard",
                               pc.fill_null(rows.column("shard"), 0))
    else:
        rows = rows.append_column("shard", pa.array([0] * rows.num_rows, pa.int32()))
    unseen = [mark is None or written > mark for written, mark in zip(
        rows.column("updated_at").to_pylist(),
        (marks.get(shard) for shard in rows.column("shard").to_pylist()), strict=True)]
    rows = rows.filter(pa.array(unseen, pa.bool_()))
    if rows.num_rows == 0:
        return None
    if rows.num_rows > max_rows:
        log.warning("%s: gating the newest %d of %d rows written since %s", view.name,
                    max_rows, rows.num_rows, since)
        rows = rows.sort_by([("updated_at", "descending")]).slice(0, max_rows)
    return with_estimates(rows, view)


def whole_seconds_around(oldest: datetime, newest: datetime) -> tuple[datetime, datetime]:
    """The half-open interval of whole seconds holding [oldest, newest] (never empty)."""
    return oldest.replace(microsecond=0), newest.replace(microsecond=0) + timedelta(seconds=1)


def validate_realtime(
    settings: Settings, view: ViewDefinition, *, max_rows: int | None = None,
    now: datetime | None = None, contracts: ContractRegistry | None = None,
    sample_size: int = SAMPLE_SIZE,
) -> GateResult | None:
    """Gate the real-time rows of ``view`` written since the last gate; None if there are
    none. The result's interval holds the write times of the rows gated, in whole seconds. Moves
    the view's
    mark past them unless validation did not run."""
    began = time.monotonic()
    now = now or datetime.now(UTC)
    limit = max_rows or settings.speed.gate_max_rows
    try:
        rows = new_rows(settings, view, limit)
    except Exception as error:  # noqa: BLE001 - a gate reports what it could not do, never raises
        return did_not_run(LAYER, view.name, now, now, error, began)
    if rows is None:
        return None
    import pyarrow.compute as pc

    written_at = rows.column("updated_at")
    oldest, newest = pc.min(written_at).as_py(), pc.max(written_at).as_py()
    start, end = whole_seconds_around(oldest, newest)
    result = run_suite_locally(rows, realtime_suite(view, contracts), layer=LAYER,
                               subject=view.name, start=start, end=end, began=began,
                               sample_size=sample_size,
                               parameters=realtime_parameters(now, view))
    if result.success or result.data_failed:  # the suite was evaluated: these rows are gated
        _remember(settings, view, rows)
    return result
