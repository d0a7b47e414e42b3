"""The tutorials' pages as tests read them: their code blocks, and their shell blocks run
as a reader would run them, on a stack of the suite's."""

from __future__ import annotations

import re
import shutil
import subprocess
from datetime import date, datetime
from pathlib import Path

from lambdalake.timeutil import iso_utc
from tests.support.repo import REPO

TUTORIALS = REPO / "docs" / "tutorials"
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.M | re.S)
EXAMPLE_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}:\d{2}Z)?\b")
PROJECT_PARTS = ("schemas", "dags", "plugins", "spark_jobs", "include/jvm", "docs")
"""What a stack reads from its project dir (``Settings.project_path``)."""


def blocks(page: str, language: str) -> list[str]:
    """The bodies of a tutorial's ``language`` code blocks, in page order."""
    text = (TUTORIALS / page).read_text()
    return [body for lang, body in BLOCK.findall(text) if lang == language]


def edited(block: str, replacements: dict[str, str]) -> str:
    """``block`` with each text replaced; each must be in it, so a tutorial whose commands
    change fails here instead of running something else."""
    for old, new in replacements.items():
        assert old in block, f"{old!r} is no longer in the tutorial's block:\n{block}"
        block = block.replace(old, new)
    return block


def redated(block: str, *moments: date) -> str:
    """``block`` with its example dates replaced, in order, by ``moments`` (a datetime
    where the page shows a timestamp, a day where it shows a day); as many as it has."""
    found = list(EXAMPLE_DATE.finditer(block))
    assert len(found) == len(moments), f"{len(found)} dates in the tutorial's block:\n{block}"
    for match, moment in reversed(list(zip(found, moments, strict=True))):
        text = iso_utc(moment) if isinstance(moment, datetime) else moment.isoformat()
        assert bool(match.group(1)) == isinstance(moment, datetime), (match.group(), moment)
        block = block[:match.start()] + text + block[match.end():]
    return block


def triggered_run_id(printed: str) -> str:
    """The run id ``lambdalake recompute`` printed (``triggered <dag> run <id> for ...``)."""
    return printed.split(" run ", 1)[1].split(" for ", 1)[0]


def run_shell_block(block: str, timeout: float = 900) -> str:
    """A tutorial's shell block run by bash from the checkout, as the page says to run it
    (``-e``: the first command that fails stops it); what it printed."""
    result = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block], cwd=REPO,
                            capture_output=True, text=True, timeout=timeout)
    output = result.stdout + result.stderr
    print(output)
    assert result.returncode == 0, f"{block}\nexited {result.returncode}:\n{output[-4000:]}"
    return output


def project_copy(directory: Path) -> Path:
    """A copy of the checkout's project files in ``directory``, for a stack whose
    ``LAMBDALAKE_PROJECT_DIR`` a tutorial may add files to without touching the checkout."""
    for part in PROJECT_PARTS:
        shutil.copytree(REPO / part, directory / part,
                        ignore=shutil.ignore_patterns("__pycache__", "images"))
    return directory
