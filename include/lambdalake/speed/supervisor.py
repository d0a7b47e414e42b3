"""Supervision of the speed layer: keep it running, tell when it is stale or falling behind.

The supervisor DAG (``lambdalake_speed_supervisor``) calls these on a short schedule; the
stack command and tests call them directly. The speed application is never run inside an
Airflow worker slot: ``ensure_running`` starts it as its own detached process, and a
process that died (crash, SIGKILL, OOM) is started again, resuming from its checkpoints.
A speed layer that was stopped on purpose is started too: pause the DAG to keep it down.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lambdalake.settings import Settings
from lambdalake.speed.service import SpeedLayer, shard_service
from lambdalake.speed.shards import shards, speed_status
from lambdalake.streaming.progress import failures, progress_time

LAG_SAMPLES_FILE = "speed-lag-samples.json"


@dataclass(frozen=True)
class SpeedHealth:
    """The verdict of one check: ``problems`` is empty when the speed layer is healthy."""

    running: bool
    lag: int | None
    newest_batch_age_seconds: float | None
    problems: list[str] = field(default_factory=list)

    @property
    def healthy(self) -> bool:
        return not self.problems

    def describe(self) -> str:
        state = "healthy" if self.healthy else "UNHEALTHY: " + "; ".join(self.problems)
        age = ("-" if self.newest_batch_age_seconds is None
               else f"{self.newest_batch_age_seconds:.0f}s")
        return f"speed layer {state} (running={self.running}, lag={self.lag}, newest batch {age})"


def lag_samples_path(settings: Settings) -> Path:
    return settings.state_dir / "status" / LAG_SAMPLES_FILE


def ensure_running(settings: Settings, timeout: float = 300.0) -> str:
    """Start every shard of the speed layer that does not run; say what was done."""
    if settings.speed.process_manager == "container":
        return "speed layer managed by the container orchestrator (not started here)"
    return "; ".join(shard_service(settings, shard).ensure_running(shard.describe(), timeout)
                     for shard in shards(settings))


def _batch_age(document: dict[str, Any], now: float) -> float | None:
    """Seconds since the oldest 'newest batch' among the views (the stalest view decides)."""
    ages = []
    for view in document.get("views", {}).values():
        stamp = view.get("batch_timestamp")
        if stamp:
            ages.append(now - progress_time(stamp))
    return max(ages) if ages else None


def check_health(settings: Settings, now: float | None = None) -> SpeedHealth:
    """Alive, fresh and keeping up? Records this check's lag for the growth trend."""
    now = time.time() if now is None else now
    speed = settings.speed
    document = speed_status(settings)
    down: list[str] = []
    if speed.process_manager == "container":  # another host: its status is the evidence
        running = document.get("active") is True
    else:
        down = [process.name for process in SpeedLayer(settings).processes
                if process.pid() is None]
        running = not down
    views = document.get("views", {})
    # views of one query show the same lag: count each query once
    by_query = {view.get("query", name): int(view.get("lag") or 0)
                for name, view in views.items()}
    lag = sum(by_query.values()) if views else None
    age = _batch_age(document, now)
    problems = []
    if not running:
        problems.append("not running" if settings.speed.shards == 1 or not down
                        else f"not running: {', '.join(down)}")
    if not document or now - float(document.get("written_at", 0)) > speed.freshness_sla_seconds:
        problems.append(f"no status for over {speed.freshness_sla_seconds}s")
    elif lag and age is not None and age > speed.freshness_sla_seconds:
        problems.append(f"{lag} records waiting and no batch for {age:.0f}s "
                        f"(SLA {speed.freshness_sla_seconds}s)")
    stopped = [name for name, v in views.items() if v.get("active") is False]
    if stopped:
        causes = failures(document)
        problems.append(f"queries stopped: {', '.join(sorted(stopped))}"
                        + (f" ({'; '.join(causes)})" if causes else ""))
    samples = _remember_lag(settings, lag, speed.lag_growth_checks)
    if len(samples) == speed.lag_growth_checks and all(
        later > earlier for earlier, later in zip(samples, samples[1:], strict=False)
    ):
        problems.append(f"lag grew over the last {len(samples)} checks: {samples}")
    return SpeedHealth(running, lag, age, problems)


def _remember_lag(settings: Settings, lag: int | None, keep: int) -> list[int]:
    """Append ``lag`` to the recent samples (kept in the state dir); return the samples."""
    path = lag_samples_path(settings)
    samples: list[int]
    try:
        samples = json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        samples = []
    if lag is not None:
        samples = [*samples, lag][-keep:]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(samples))
    return samples


def alerts_path(settings: Settings) -> Path:
    return settings.state_dir / "alerts" / "speed.jsonl"


def record_alert(settings: Settings, what: str, problems: list[str]) -> Path:
    """Append an alert line (JSON: when, what, problems) that ``lambdalake status`` shows."""
    path = alerts_path(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as alerts:
        alerts.write(json.dumps({"at": time.time(), "what": what, "problems": problems}) + "\n")
    return path


def recent_alerts(settings: Settings, within_seconds: float, now: float | None = None
                  ) -> list[dict[str, Any]]:
    """The alerts of the last ``within_seconds``, oldest first."""
    now = time.time() if now is None else now
    try:
        lines = alerts_path(settings).read_text().splitlines()
    except FileNotFoundError:
        return []
    alerts = [json.loads(line) for line in lines if line]
    return [a for a in alerts if now - float(a["at"]) <= within_seconds]
