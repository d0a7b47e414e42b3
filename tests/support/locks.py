"""The hashed locks (requirements.txt, requirements-dev.txt) and pyproject.toml's dependency
lists, read the way pip reads them, for the repo tier's checks."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.support.repo import REPO

RUNTIME_LOCK = REPO / "requirements.txt"
DEV_LOCK = REPO / "requirements-dev.txt"
_PIN = re.compile(r"(?P<name>[A-Za-z0-9][A-Za-z0-9_.\-]*)==(?P<version>[\w.+!\-]+)"
                  r"(?P<hashes>(?:\s+--hash=sha256:[0-9a-f]{64})*)")


@dataclass(frozen=True)
class Pin:
    """One locked distribution: its exact version and the hashes pip accepts for it."""

    version: str
    hashes: frozenset[str]


def requirement_lines(lock: Path) -> list[str]:
    """The requirement lines of ``lock``, continuation lines joined, comments dropped."""
    text = re.sub(r"\s*\\\n", " ", lock.read_text())
    lines = (re.sub(r"(^|\s)#.*", "", line).strip() for line in text.splitlines())
    return [line for line in lines if line]


def pins(lock: Path) -> dict[str, Pin]:
    """Every distribution ``lock`` pins, by canonical name; a line that is no exact,
    hashed pin fails (``--require-hashes`` would refuse the whole file)."""
    pinned: dict[str, Pin] = {}
    for line in requirement_lines(lock):
        match = _PIN.fullmatch(line)
        assert match and match["hashes"], f"{lock.name}: not an exact hashed pin: {line}"
        hashes = frozenset(re.findall(r"sha256:[0-9a-f]{64}", match["hashes"]))
        pinned[canonicalize_name(match["name"])] = Pin(match["version"], hashes)
    return pinned


def required_by(lock: Path) -> dict[str, set[str]]:
    """What needs each distribution of ``lock``, from the resolver's ``# via`` notes: the
    locked distributions (canonical names) and ``lambdalake (pyproject.toml)``."""
    needs: dict[str, set[str]] = {}
    current = ""
    for line in lock.read_text().splitlines():
        if match := re.match(r"([A-Za-z0-9][A-Za-z0-9_.\-]*)==", line):
            current = canonicalize_name(match[1])
            needs[current] = set()
        elif note := re.fullmatch(r"\s+#\s+(?:via\s+)?([^\s#].*)", line):
            needer = note[1].strip()
            if needer != "via":
                needs[current].add(needer if "(" in needer else canonicalize_name(needer))
    return needs


def declared() -> tuple[list[Requirement], list[Requirement]]:
    """pyproject.toml's direct dependencies: the runtime ones and the dev extra's."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return ([Requirement(line) for line in project["dependencies"]],
            [Requirement(line) for line in project["optional-dependencies"]["dev"]])
