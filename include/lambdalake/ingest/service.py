"""The ingest stream as a long-running process of the stack (see ``lambdalake.streaming``)."""

from __future__ import annotations

from lambdalake.ingest.completeness import entity_topics, reference_offsets
from lambdalake.ingest.status import QUERY_NAME
from lambdalake.settings import Settings
from lambdalake.stack.process import ManagedProcess
from lambdalake.streaming import service
from lambdalake.streaming.service import StreamingService, app_process, start_app_process


def ingest_process(settings: Settings) -> ManagedProcess:
    return app_process(settings, QUERY_NAME)


def start_ingest_process(settings: Settings) -> int:
    """Start the ingest job detached with exactly these settings (a no-op if it runs)."""
    return start_app_process(settings, QUERY_NAME)


class IngestService(StreamingService):
    """The ingest stream as a component of the platform (start, stop, health)."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings, QUERY_NAME)
        self.label = "ingest stream (Kafka -> bronze)"


def ensure_ingest_running(settings: Settings, timeout: float = 300.0) -> str:
    """Start ingest unless it runs (after a crash it resumes from its checkpoint); say what
    was done. Where an orchestrator runs the streams (``speed.process_manager``) it
    restarts ingest itself."""
    if settings.speed.process_manager == "container":
        return "ingest managed by the container orchestrator (not started here)"
    return IngestService(settings).ensure_running("ingest", timeout)


def wait_caught_up(settings: Settings, timeout: float = 300.0) -> dict[str, int]:
    """Wait until ingest has committed every record now in the events topic to bronze (or
    quarantine), and every change now in the entities' topics to the reference changelog."""
    events = service.wait_caught_up(settings, QUERY_NAME, timeout)
    reference = service.wait_caught_up(settings, QUERY_NAME, timeout,
                                       topics=entity_topics(settings),
                                       consumed=reference_offsets)
    return {**events, **reference}
