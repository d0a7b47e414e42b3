"""The query API as a component of the local stack: uvicorn on loopback, started by PID."""

from __future__ import annotations

import sys

import httpx

from lambdalake.settings import Settings
from lambdalake.stack.process import OneProcessComponent

APP_FACTORY = "lambdalake.serving.api:create_app"


def uvicorn_command(settings: Settings) -> list[str]:
    """How the API is served: ``serving.workers`` uvicorn processes on host:port, each with
    its own snapshots (a query is CPU, and one process has one GIL)."""
    serving = settings.serving
    return [sys.executable, "-m", "uvicorn", "--factory", APP_FACTORY, "--host", serving.host,
            "--port", str(serving.port), "--workers", str(serving.workers), "--no-access-log"]


SERVING_SECRETS = ("serving.api_token", "lake.object_store.secret_access_key")
"""The credentials the query API uses: its own token and the lake's."""


class ServingService(OneProcessComponent):
    """``uvicorn --factory lambdalake.serving.api:create_app`` with the stack's settings."""

    label = "query API (merged views)"
    process_name = "serving-api"

    def start(self, timeout: float = 60.0) -> int:
        """Start unless running; wait until ``/health`` answers; return the pid."""
        pid = self.process.start(uvicorn_command(self.settings),
                                 env=self.settings.child_environment(SERVING_SECRETS),
                                 cwd=self.settings.project_path())
        self.process.wait_until(self.healthy, timeout,
                                f"GET {self.settings.serving.base_url}/health")
        return pid

    def healthy(self) -> bool:
        return httpx.get(f"{self.settings.serving.base_url}/health", timeout=2).status_code == 200

    def stop(self) -> bool:
        return self.process.stop(timeout=30)
