"""The README never lies: its commands are the ones CI runs, its settings table is current."""

import re

from bench.publish import published_block, readme_figures
from lambdalake.cli.docs import settings_table
from lambdalake.settings import PROJECT_ROOT

README = (PROJECT_ROOT / "README.md").read_text()


def test_the_two_commands_come_first_and_ci_runs_the_test_command() -> None:
    first_block = README.split("```bash", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in first_block.strip().splitlines()]
    assert commands == ["make demo", "make test"]
    assert "make test" in (PROJECT_ROOT / ".ci" / "run").read_text()
    makefile = (PROJECT_ROOT / "Makefile").read_text()
    assert "\ndemo:" in makefile and "\ntest:" in makefile


def test_the_settings_table_matches_the_settings_module() -> None:
    generated = settings_table()
    start = README.index("<!-- settings-table")
    end = README.index("<!-- /settings-table -->")
    table = README[start:end].split("\n", 1)[1]
    assert table == generated, "README's settings table is stale: run `lambdalake docs`"


def test_the_benchmark_figures_are_those_of_the_published_run() -> None:
    assert readme_figures(README) == published_block(), (
        "README's benchmark figures differ from docs/benchmarks: run `python -m bench.publish`")
    for chart in re.findall(r"\]\((docs/benchmarks/[^)]+\.png)\)", readme_figures(README)):
        assert (PROJECT_ROOT / chart).is_file(), chart
