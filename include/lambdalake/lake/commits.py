"""Commits that lost a race with another writer, retried: written once for every table.

Delta commits optimistically: a writer whose commit finds a newer version than the one it
read fails (delta-rs: ``CommitFailedError``; Spark: ``io.delta.exceptions.Concurrent*``)
and has committed nothing. Every write of the platform is safe to repeat from the newer
version (an append that checks its transaction version first, a replaced slice, a
rewrite of closed windows, a delete), so a lost race is simply tried again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

COMMIT_ATTEMPTS = 5
_T = TypeVar("_T")


def is_commit_conflict(error: BaseException) -> bool:
    """Whether ``error`` is a commit that lost to a concurrent writer (nothing written)."""
    from deltalake.exceptions import CommitFailedError

    if isinstance(error, CommitFailedError):
        return True
    text = str(error)  # py4j/pyspark wrap Delta's exception classes
    return "io.delta.exceptions.Concurrent" in text or "DELTA_CONCURRENT" in text


def retry_on_conflict(write: Callable[[], _T], attempts: int = COMMIT_ATTEMPTS,
                      pause_seconds: float = 0.0) -> _T:
    """``write()``, again after a lost commit race (up to ``attempts`` times in all, the
    n-th retry ``n * pause_seconds`` later); other errors and the last conflict propagate."""
    for attempt in range(1, attempts + 1):
        try:
            return write()
        except Exception as error:
            if attempt == attempts or not is_commit_conflict(error):
                raise
            time.sleep(pause_seconds * attempt)
    raise AssertionError("unreachable")
