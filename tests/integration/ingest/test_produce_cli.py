"""`lambdalake produce` stops cleanly on SIGINT: everything sent is flushed and accounted for."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

from lambdalake.settings import Settings
from lambdalake.streaming.service import topic_end_offsets

SENT_BEFORE_SIGINT = 1000


def test_sigint_flushes_and_writes_the_manifest(ingest_settings: Settings, tmp_path) -> None:
    manifest = tmp_path / "manifest.json"
    process = subprocess.Popen(
        [sys.executable, "-m", "lambdalake.cli", "produce", "--count", "1000000",
         "--rate", "3000", "--manifest", str(manifest)],
        env={**os.environ, **ingest_settings.to_environment()},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while sum(topic_end_offsets(ingest_settings).values()) <= SENT_BEFORE_SIGINT:
            assert process.poll() is None and time.monotonic() < deadline, "nothing produced"
            time.sleep(0.2)
        process.send_signal(signal.SIGINT)  # records in Kafka: its handler is installed
        output, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, output
    summary = re.search(r"produced (\d+) records .* acknowledged (\d+), failed (\d+)", output)
    assert summary, output
    produced, acknowledged, failed = map(int, summary.groups())
    assert SENT_BEFORE_SIGINT < produced < 1_000_000  # stopped early, not killed
    assert acknowledged == produced and failed == 0
    assert manifest.exists()
