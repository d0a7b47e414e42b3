"""The ingest profile counts a JVM's CPU by its threads' roles, ended threads included."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from bench.diagnostics.ingest_profile import JvmThreadCpu


class BusyThread(threading.Thread):
    """A thread that spins for ``seconds`` of CPU under ``name`` (as the kernel knows it),
    then waits for ``release`` before it ends."""

    def __init__(self, name: str, seconds: float) -> None:
        super().__init__()
        self.kernel_name, self.seconds = name, seconds
        self.spun, self.release = threading.Event(), threading.Event()

    def run(self) -> None:
        Path(f"/proc/self/task/{threading.get_native_id()}/comm").write_text(self.kernel_name)
        until = time.thread_time() + self.seconds
        while time.thread_time() < until:
            pass
        self.spun.set()
        self.release.wait()


def test_threads_count_by_role_and_after_they_end() -> None:
    threads = JvmThreadCpu(os.getpid())
    busy = [BusyThread("C2 CompilerThread0", 0.3),
            BusyThread("Executor task launch worker for task 1.0", 0.2)]
    for thread in busy:
        thread.start()
        thread.spun.wait()
    alive = threads.sample()
    for thread in busy:
        thread.release.set()
        thread.join()
    ended = threads.sample()  # both threads are gone from /proc now

    assert alive["JIT"] >= 0.25
    assert alive["tasks"] >= 0.15
    assert alive["GC"] == 0
    assert (ended["JIT"], ended["tasks"]) == (alive["JIT"], alive["tasks"])
