"""A streaming application's words reach its log file: the platform's INFO records go to
standard output (which the stack's process manager writes to the log), a line each."""

import subprocess
import sys

APPLICATION = """
import logging
from lambdalake.streaming.runner import log_to_stdout
log_to_stdout()
logging.getLogger("lambdalake.ingest.stream").info("ingest: query %s started", "q1")
logging.getLogger("lambdalake.speed.stream").debug("not shown")
logging.getLogger("py4j").info("not the platform's")
"""


def test_a_streaming_application_logs_the_platforms_info_records_to_stdout() -> None:
    done = subprocess.run([sys.executable, "-c", APPLICATION], capture_output=True, text=True,
                          check=True)
    [line] = done.stdout.splitlines()
    assert line.endswith(" INFO ingest: query q1 started")
    assert done.stderr == ""

