"""The real-time views: one Delta table per view, written by the speed layer, read by serving.

The speed layer's aggregation runs in update mode: each micro-batch emits, for every
(window, dimensions) key it touched, the key's *whole* current value from the query's
state. ``append_updates`` appends those rows, stamped with the batch id and the time of
the write, with Delta's idempotent-write options (``txnAppId`` = the query's id,
``txnVersion`` = the batch id): a batch replayed after a crash is skipped if it committed,
and written once if it did not. A key's current value is its newest row (``current_rows``);
a repeated row is harmless by construction, because rows carry values, not increments.

Tables are partitioned by ``window_start`` like the batch views, so retiring or compacting
closed windows (the serving step's job) never conflicts with the stream's appends to open
ones.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lambdalake.settings import Settings
from lambdalake.views.definition import ViewDefinition

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

def realtime_table(view: ViewDefinition | str) -> str:
    name = view if isinstance(view, str) else view.name
    return f"realtime_{name}"


def append_updates(
    updates: DataFrame, settings: Settings, view: ViewDefinition, app_id: str, batch_id: int
) -> None:
    """Append one micro-batch's updated rows of ``view``, exactly once per (app_id, batch_id)."""
    from pyspark.sql import functions as F

    (
        updates.withColumns({"batch_id": F.lit(batch_id).cast("long"),
                             "updated_at": F.current_timestamp()})
        .write.format("delta").mode("append")
        .option("txnAppId", app_id).option("txnVersion", batch_id)
        .partitionBy("window_start")
        .save(settings.table_path(realtime_table(view)))
    )


def current_rows(spark: SparkSession, settings: Settings, view: ViewDefinition) -> DataFrame:
    """Each key's newest value (window_start, window_end, dimensions, measures, updated_at)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    newest_first = Window.partitionBy(*view.key).orderBy(F.col("updated_at").desc(),
                                                         F.col("batch_id").desc())
    return (
        spark.read.format("delta").load(settings.table_path(realtime_table(view)))
        .withColumn("_rank", F.row_number().over(newest_first))
        .where("_rank = 1")
        .drop("_rank", "batch_id")
    )
