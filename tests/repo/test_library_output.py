"""The library logs; only the command line prints. What a long-running process says goes
through ``logging`` (its log file, Airflow's task log), and what a command shows its user
is printed by ``lambdalake.cli``, so no core module decides where its words end up."""

import ast
from pathlib import Path

LIBRARY = Path(__file__).parents[2] / "include" / "lambdalake"
PRINTS_ALLOWED = {
    # a Spark step forked without a new interpreter exits as an interpreter would: a
    # non-integer sys.exit() argument is printed to stderr, as CPython prints it
    "orchestration/spark_jobs.py": 1,
}


def print_calls(source: str) -> int:
    return sum(isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
               and node.func.id == "print" for node in ast.walk(ast.parse(source)))


def test_only_the_command_line_prints() -> None:
    found = {str(path.relative_to(LIBRARY)): calls
             for path in sorted(LIBRARY.rglob("*.py"))
             if path.relative_to(LIBRARY).parts[0] != "cli"
             and (calls := print_calls(path.read_text()))}
    assert found == PRINTS_ALLOWED, "log with logging.getLogger(__name__), or return the text"


def test_a_print_call_is_counted_and_a_mention_is_not() -> None:
    assert print_calls('print("x")\nlog.info("print(%s)", 1)\necho = print\n') == 1
