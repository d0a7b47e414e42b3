"""What the fault and fuzz tests measured (records reconciled, requests sent, 5xx
answers), printed in the session's summary so every CI log carries them.

A test takes the ``figures`` fixture and calls it once per finding:
``figures(requests=900, server_errors=0)``; the summary prints one line per test."""

from __future__ import annotations

from collections.abc import Callable

import pytest

FIGURES = pytest.StashKey[dict[str, dict[str, object]]]()

Figures = Callable[..., None]


@pytest.fixture
def figures(request: pytest.FixtureRequest) -> Figures:
    recorded = request.config.stash.setdefault(FIGURES, {})

    def record(**measured: object) -> None:
        recorded.setdefault(request.node.nodeid, {}).update(measured)

    return record


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    recorded = terminalreporter.config.stash.get(FIGURES, {})
    if not recorded:
        return
    terminalreporter.section("fault and fuzz figures")
    for test, measured in recorded.items():
        terminalreporter.write_line(
            f"{test}: " + ", ".join(f"{name}={value}" for name, value in measured.items()))
