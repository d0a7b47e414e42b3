"""The status report across layers (``lambdalake status``, ``make status``): how far each
layer has come, read from the streams' status files and from Delta, and recent alerts."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from lambdalake.batch.late_arrivals import LateArrivals
from lambdalake.batch.restatement import read_restatements
from lambdalake.ingest.status import QUERY_NAME as INGEST
from lambdalake.serving.freshness import view_freshness
from lambdalake.serving.snapshot import SnapshotStore
from lambdalake.settings import Settings
from lambdalake.speed.shards import speed_status
from lambdalake.speed.supervisor import recent_alerts
from lambdalake.streaming.progress import failures, read_status
from lambdalake.views.definition import load_views


def layer_freshness(settings: Settings) -> list[str]:
    """Each layer's progress, a line each: ingest and speed from their status, batch and
    serving from Delta; the newest restatements; then the supervisor's alerts of the last
    hour."""
    lines: list[str] = []
    ingest = read_status(settings, INGEST)
    if ingest:
        age = time.time() - ingest["written_at"]
        rate = ingest.get("processed_rows_per_second") or 0
        lines += ["", f"ingest: batch {ingest['batch_id']}, lag {ingest['lag']} records, "
                      f"{rate:,.0f} rows/s processed, status {age:.0f}s old"]
    speed_document = speed_status(settings)
    for failure in failures(ingest or {}) + failures(speed_document):
        lines.append(f"FAILED {failure}")
    speed = speed_document.get("views", {})
    for view, query in speed.items():
        rate = query.get("processed_rows_per_second") or 0
        lines.append(f"speed {view}: batch {query['batch_id']}, lag {query['lag']} records, "
                     f"watermark {query['watermark']}, {rate:,.0f} rows/s processed, "
                     f"{query['dropped_by_watermark_total']} late rows dropped, "
                     f"{query['state_rows']} event ids held")
    views = load_views()
    store, now = SnapshotStore(settings, views), datetime.now(UTC)
    waiting = {w.view: w for w in LateArrivals(settings, list(views.values())).waiting()}
    for name in sorted(views):
        fresh = view_freshness(store.get(name), speed.get(name, {}), now, waiting[name])
        realtime = ("no real-time rows" if fresh["realtime_age_seconds"] is None
                    else f"newest real-time row {fresh['realtime_age_seconds']:.0f}s old")
        late = ("" if not fresh["late_rows_waiting"] else
                f"; {fresh['late_rows_waiting']} late rows ({fresh['late_events_waiting']} "
                f"events) wait for published windows from {fresh['oldest_waiting_window']} on")
        beyond = "".join(f" and [{start}, {end})" for start, end in fresh["batch_beyond_mark"])
        lines.append(f"serving {name}: batch up to {fresh['high_water_mark']}{beyond} "
                     f"({fresh['batch_behind_seconds'] / 3600:.1f} h ago, view "
                     f"v{fresh['batch_view_version']}), {realtime}{late}")
    for restated in read_restatements(settings)[-5:]:
        lines.append(
            f"restated {restated['view']} [{restated['interval_start']:%Y-%m-%d %H:%M}, "
            f"{restated['interval_end']:%Y-%m-%d %H:%M}) at {restated['restated_at']:%H:%M:%S}"
            f"Z: {restated['late_rows']} late rows taken in, run {restated['run_id']}")
    for alert in recent_alerts(settings, within_seconds=3600):
        lines.append(
            f"ALERT {datetime.fromtimestamp(alert['at'], UTC):%H:%M:%S}Z {alert['what']}"
            + "".join(f"\n  {problem}" for problem in alert["problems"]))
    return lines
