"""pyproject.toml declares the direct dependencies; the two hashed locks pin them: the
runtime lock (requirements.txt, what the image installs) and the dev lock
(requirements-dev.txt, what `make setup` installs: the runtime pins plus the dev extra's)."""

from __future__ import annotations

import re

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.support.locks import DEV_LOCK, RUNTIME_LOCK, Pin, declared, pins, required_by
from tests.support.repo import REPO


def unpinned(requirements: list[Requirement], lock: dict[str, Pin]) -> list[str]:
    """The requirements ``lock`` does not pin to a version they allow."""
    return [str(requirement) for requirement in requirements
            if canonicalize_name(requirement.name) not in lock
            or not requirement.specifier.contains(
                lock[canonicalize_name(requirement.name)].version, prereleases=True)]


def test_every_runtime_dependency_is_pinned_in_the_runtime_lock() -> None:
    runtime, _ = declared()
    assert unpinned(runtime, pins(RUNTIME_LOCK)) == []


def test_every_dependency_is_pinned_in_the_dev_lock() -> None:
    runtime, dev = declared()
    assert unpinned(runtime + dev, pins(DEV_LOCK)) == []


def test_the_runtime_lock_holds_a_dev_dependency_only_where_the_runtime_needs_it() -> None:
    """pytest, ruff, mypy, playwright, schemathesis... stay out of the runtime (and the
    image); ``packaging`` is in it because Airflow and GX require it."""
    _, dev = declared()
    runtime, needs = pins(RUNTIME_LOCK), required_by(RUNTIME_LOCK)
    leaked = [str(r) for r in dev if canonicalize_name(r.name) in runtime
              and not needs[canonicalize_name(r.name)] & set(runtime)]
    assert leaked == []
    assert "pytest" not in runtime


def test_the_runtime_lock_is_what_the_runtime_dependencies_need() -> None:
    """Each runtime pin is a declared dependency or required by another runtime pin."""
    runtime, needs = pins(RUNTIME_LOCK), required_by(RUNTIME_LOCK)
    assert set(needs) == set(runtime)
    assert [name for name, needers in needs.items()
            if not needers & (set(runtime) | {"lambdalake (pyproject.toml)"})] == []


def test_the_dev_lock_keeps_the_runtime_pins_and_hashes() -> None:
    """The checkout's venv runs the code on exactly what the image runs it on."""
    dev = pins(DEV_LOCK)
    assert {name: pin for name, pin in pins(RUNTIME_LOCK).items() if dev.get(name) != pin} == {}


def test_the_image_installs_the_runtime_lock_only_and_checks_its_hashes() -> None:
    dockerfile = (REPO / "Dockerfile").read_text().replace("\\\n", " ")
    installs = re.findall(r"pip install ([^&\n]+)", dockerfile)
    locks = [flags for flags in installs if "-r " in flags]
    assert len(locks) == 1 and "--require-hashes" in locks[0].split(), installs
    assert re.search(r"-r requirements\.txt\b", locks[0])
    assert "requirements-dev" not in dockerfile and "[dev]" not in dockerfile
    assert all("--no-deps" in flags.split() for flags in installs if flags not in locks)


def test_setup_installs_the_dev_lock_with_its_hashes() -> None:
    makefile = (REPO / "Makefile").read_text()
    assert re.search(r"pip install .*--require-hashes -r requirements-dev\.txt", makefile)
    assert re.search(r"pip install .*--no-deps -e \.", makefile)
