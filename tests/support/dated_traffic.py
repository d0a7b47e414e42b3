"""Which test modules produce through Kafka, and where tests write fixed dates.

Kafka stamps each record with the time it is produced, and ingest quarantines event times
more than ``ingest.max_event_age_days`` before that stamp: a fixed event date in traffic that
goes through Kafka makes its test fail once the date is that old (CI went red that way on
2026-11-30). ``tests/repo/test_fixed_dates.py`` holds the suite to two rules with this:

- a module that produces through Kafka writes no date as a string (an event's or an
  entity's time there is traffic);
- every ``datetime(2026, ...)`` or ``date(2026, ...)`` in an integration or end-to-end test or
  their support
  carries a ``# fixed date:`` comment (on its line or in the comment block above it) saying why no age or
  "now" comparison reaches it; anything else is placed relative to now
  (``tests/support/clock.py``).

``python -m tests.support.dated_traffic`` lists the producing modules: `make test-clock-ahead`
runs them with every process's clock moved ahead.
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass
from pathlib import Path

TESTS = Path(__file__).parents[1]
CHECKED = (TESTS / "integration", TESTS / "e2e", TESTS / "support")
PRODUCING_NAMES = frozenset({
    "EventProducer", "Producer", "SerializingProducer", "produce_traffic",
    "produce_in_background", "reference_producers",
})
"""Imported names that put records on a Kafka topic (the platform's producer, confluent-kafka's,
the traffic generator's loop and the support modules wrapping them)."""
JUSTIFICATION = "# fixed date:"
ISO_DATE = re.compile(r"(?<!\d)\d{4}-\d{2}-\d{2}(?!\d)")


@dataclass(frozen=True)
class FixedDate:
    """A date written into a test's source: where, and how."""

    path: Path
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.path.relative_to(TESTS.parent)}:{self.line}: {self.text}"


def produces_through_kafka(tree: ast.Module) -> bool:
    """Whether the module imports a name that produces to Kafka."""
    return any(isinstance(node, ast.ImportFrom)
               and any(alias.name in PRODUCING_NAMES for alias in node.names)
               for node in ast.walk(tree))


def literal_dates(tree: ast.Module) -> list[ast.Call]:
    """``datetime(<year>, ...)`` and ``date(<year>, ...)`` calls with a literal year."""
    def called(node: ast.Call) -> str | None:
        function = node.func
        return function.id if isinstance(function, ast.Name) else (
            function.attr if isinstance(function, ast.Attribute) else None)

    return [node for node in ast.walk(tree) if isinstance(node, ast.Call)
            and called(node) in ("datetime", "date") and node.args
            and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, int)]


def date_strings(tree: ast.Module) -> list[ast.Constant]:
    """String constants holding an ISO date (docstrings too: prose names dates as well, and
    a producing module has no reason to)."""
    return [node for node in ast.walk(tree) if isinstance(node, ast.Constant)
            and isinstance(node.value, str) and ISO_DATE.search(node.value)]


def unjustified_dates(path: Path) -> list[FixedDate]:
    """The fixed dates in ``path`` that break the rules above."""
    source = path.read_text()
    lines = source.splitlines()
    tree = ast.parse(source, str(path))

    def justified(line: int) -> bool:
        """The date's line, or the comment block right above it, says why."""
        above = line - 1
        while above > 0 and lines[above - 1].lstrip().startswith("#"):
            if lines[above - 1].lstrip().startswith(JUSTIFICATION):
                return True
            above -= 1
        return JUSTIFICATION in lines[line - 1]

    found = [FixedDate(path, node.lineno, lines[node.lineno - 1].strip())
             for node in literal_dates(tree) if not justified(node.lineno)]
    if produces_through_kafka(tree):
        found += [FixedDate(path, node.lineno, repr(node.value)[:80])
                  for node in date_strings(tree)]
    return sorted(found, key=lambda fixed: fixed.line)


def checked_modules() -> list[Path]:
    return sorted(path for root in CHECKED for path in root.rglob("*.py"))


def producing_test_modules() -> list[Path]:
    """The integration test modules that produce through Kafka: the suite's date-sensitive
    tests."""
    return [path for path in checked_modules() if path.name.startswith("test_")
            and produces_through_kafka(ast.parse(path.read_text(), str(path)))]


if __name__ == "__main__":
    sys.stdout.write("".join(f"{path.relative_to(TESTS.parent)}\n"
                             for path in producing_test_modules()))
