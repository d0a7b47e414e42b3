"""Work a test runs beside its main thread, whose failure fails the test.

An exception in a plain ``threading.Thread`` only becomes a warning at the end of the test,
so an assertion made there could fail unseen; ``Background.result`` raises it in the test.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Background(threading.Thread, Generic[T]):
    """``target()`` in a started daemon thread; ``result`` joins it and returns its value."""

    def __init__(self, target: Callable[[], T], name: str) -> None:
        super().__init__(name=name, daemon=True)
        self._target_call = target
        self._value: T | None = None
        self._error: BaseException | None = None
        self.start()

    def run(self) -> None:
        try:
            self._value = self._target_call()
        except BaseException as error:  # noqa: BLE001 - raised again in the test by result()
            self._error = error

    def result(self, timeout: float) -> T:
        """The target's return value once it finished within ``timeout`` seconds; what it
        raised, raised again here."""
        self.join(timeout)
        assert not self.is_alive(), f"{self.name} still running after {timeout:.0f} s"
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]
