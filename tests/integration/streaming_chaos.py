"""Crash helpers for streaming tests: SIGKILL an application while a micro-batch is in flight."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from lambdalake.stack.process import ManagedProcess


def batches(checkpoint: Path, log: str) -> set[int]:
    folder = checkpoint / log
    return {int(p.name) for p in folder.iterdir() if p.name.isdigit()} if folder.exists() else set()


def committed(checkpoints: Sequence[Path]) -> dict[Path, int]:
    """The last committed batch of each query's checkpoint (-1: none yet)."""
    return {c: max(batches(c, "commits"), default=-1) for c in checkpoints}


def kill_mid_batch(
    process: ManagedProcess, checkpoints: Sequence[Path], committed_before: dict[Path, int],
    timeout: float = 180,
) -> dict[Path, int]:
    """Once some query has committed a batch newer than ``committed_before``, SIGKILL the
    application while that query's next batch is in flight (planned in its offset log, not
    yet in its commit log); return the last committed batch of every query."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for checkpoint in checkpoints:
            done = max(batches(checkpoint, "commits"), default=-1)
            planned = max(batches(checkpoint, "offsets"), default=-1)
            if done > committed_before.get(checkpoint, -1) and planned > done:
                process.kill()
                assert max(batches(checkpoint, "commits"), default=-1) < planned, "not mid-batch"
                return committed(checkpoints)
        time.sleep(0.05)
    raise AssertionError(f"no batch in flight after {committed_before} within {timeout}s")
