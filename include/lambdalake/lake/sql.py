"""Delta tables named by path in Spark SQL.

Delta's SQL commands (``OPTIMIZE``) run the same in a task's own driver and over Spark
Connect, where Delta's Python ``DeltaTable`` API would need a server plugin; the
platform's tables are addressed by path, never by catalog name.
"""


def delta_path(path: str) -> str:
    """``path`` as a Spark SQL table identifier: delta.`path` (backticks doubled)."""
    return "delta.`" + path.replace("`", "``") + "`"
