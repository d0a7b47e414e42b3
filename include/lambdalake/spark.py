"""The SparkSession factory: the one way every job and test gets Spark.

It puts the connector jars that setup resolved (Delta Lake, the Kafka source) on the
classpath, so nothing is downloaded when a job starts, turns on Delta's SQL extensions and
catalog, pins the session time zone to UTC (event time is UTC everywhere), keeps shuffles
small for a 2-core machine, and binds the driver to loopback. The master is a setting:
``local[*]`` by default, ``spark://host:7077`` for a standalone cluster.

>>> spark = get_spark("batch")                     # doctest: +SKIP
>>> spark.range(3).write.format("delta").save(settings.table_path("t"))  # doctest: +SKIP
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

from lambdalake.settings import Settings, get_settings
from lambdalake.stack.jars import spark_jars

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


HUGE_METHODS_COMPILED = "-XX:-DontCompileHugeMethods"


def spark_conf(
    app_name: str, settings: Settings, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Every Spark property the factory sets, as plain data (tested without a JVM)."""
    spark = settings.spark
    partitions = str(spark.shuffle_partitions)
    conf = {
        "spark.master": spark.master,
        "spark.app.name": f"{spark.app_name_prefix}-{app_name}",
        "spark.jars": ",".join(str(jar) for jar in spark_jars(settings)),
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": partitions,
        "spark.default.parallelism": partitions,
        "spark.databricks.delta.snapshotPartitions": partitions,
        # streaming drivers read every recent progress report each second (status, batch
        # history); Spark's default keeps 100 per query, all parsed from JSON on each read
        "spark.sql.streaming.numRecentProgressUpdates": "30",
        "spark.driver.memory": spark.driver_memory,
        # Whole-stage code generation compiles a stage into one method; the classification
        # stage's is larger than HotSpot's 8,000-byte limit for JIT compilation, so it ran
        # interpreted (the top of every profile of ingest and speed); measured 33 % less
        # time for classifying 100,000 records with the limit lifted. Default options come
        # before a user's extraJavaOptions, which add to them (and can override the flag)
        "spark.driver.defaultJavaOptions": HUGE_METHODS_COMPILED,
        "spark.executor.defaultJavaOptions": HUGE_METHODS_COMPILED,
        "spark.driver.host": spark.driver_host,
        "spark.driver.bindAddress": spark.driver_host,
        "spark.ui.enabled": str(spark.ui_enabled).lower(),
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.warehouse.dir": str(settings.state_dir / "spark-warehouse"),
        "spark.local.dir": str(settings.state_dir / "spark-tmp"),
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
    }
    conf.update(spark.extra_conf)
    conf.update(extra or {})
    return conf


def get_spark(
    app_name: str,
    settings: Settings | None = None,
    extra_conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """Return the process's SparkSession, creating it from settings on first use."""
    from pyspark.sql import SparkSession

    settings = settings or get_settings()
    os.environ.setdefault("SPARK_LOCAL_IP", settings.spark.driver_host)
    (settings.state_dir / "spark-tmp").mkdir(parents=True, exist_ok=True)
    builder = SparkSession.builder
    for key, value in spark_conf(app_name, settings, extra_conf).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session
