"""Delta tables named by path in Spark SQL.

Delta's SQL commands (``OPTIMIZE``) run the same in a task's own driver and over Spark
Connect, where Delta's Python ``DeltaTable`` API would need a server plugin; the
platform's tables are addressed by path, never by catalog name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from lambdalake.lake.delta_rs import table_exists, table_properties

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def delta_path(path: str) -> str:
    """``path`` as a Spark SQL table identifier: delta.`path` (backticks doubled)."""
    return "delta.`" + path.replace("`", "``") + "`"


def upgrade_properties(spark: SparkSession, path: str, properties: Mapping[str, str]) -> bool:
    """Give an existing table at ``path`` the ``properties`` it lacks (declared since its
    first write); whether it changed. A new table gets them from its first write."""
    if not table_exists(path):
        return False
    current = table_properties(path)
    missing = {key: value for key, value in properties.items() if current.get(key) != value}
    if not missing:
        return False
    assignments = ", ".join(f"'{key}' = '{value}'" for key, value in sorted(missing.items()))
    spark.sql(f"ALTER TABLE {delta_path(path)} SET TBLPROPERTIES ({assignments})")
    return True
