from pathlib import Path

from lambdalake.settings import Settings
from lambdalake.spark import spark_conf


def settings_with_jars(tmp_path: Path, **overrides: object) -> Settings:
    jars = tmp_path / "jars" / "spark-connectors"
    jars.mkdir(parents=True)
    (jars / "delta-spark_2.13-4.0.0.jar").touch()
    return Settings(state_dir=tmp_path, **overrides)


def test_delta_is_wired_and_time_is_utc(tmp_path: Path) -> None:
    conf = spark_conf("batch", settings_with_jars(tmp_path))
    assert conf["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension"
    assert conf["spark.sql.catalog.spark_catalog"].endswith("DeltaCatalog")
    assert conf["spark.sql.session.timeZone"] == "UTC"
    assert conf["spark.jars"].endswith("delta-spark_2.13-4.0.0.jar")
    assert conf["spark.app.name"] == "lambdalake-batch"


def test_master_and_tuning_come_from_settings(tmp_path: Path) -> None:
    settings = settings_with_jars(
        tmp_path,
        spark={"master": "spark://127.0.0.1:7077", "shuffle_partitions": 8,
               "extra_conf": {"spark.executor.memory": "1g"}},
    )
    conf = spark_conf("speed", settings, {"spark.sql.shuffle.partitions": "3"})
    assert conf["spark.master"] == "spark://127.0.0.1:7077"
    assert conf["spark.databricks.delta.snapshotPartitions"] == "8"
    assert conf["spark.executor.memory"] == "1g"
    assert conf["spark.sql.shuffle.partitions"] == "3"  # per-job overrides win
    assert conf["spark.ui.enabled"] == "false"


def test_huge_generated_methods_are_jit_compiled_whatever_java_options_are_added(
    tmp_path: Path,
) -> None:
    """The classification stage's generated method is larger than HotSpot's limit for JIT
    compilation; without the flag it runs interpreted, in the driver and executors alike.
    A user's own extraJavaOptions come after it instead of replacing it."""
    settings = settings_with_jars(
        tmp_path, spark={"extra_conf": {"spark.driver.extraJavaOptions": "-Xss4m"}})
    conf = spark_conf("speed", settings)
    assert conf["spark.driver.defaultJavaOptions"] == "-XX:-DontCompileHugeMethods"
    assert conf["spark.executor.defaultJavaOptions"] == "-XX:-DontCompileHugeMethods"
    assert conf["spark.driver.extraJavaOptions"] == "-Xss4m"
