"""Settings whose jar directory holds what ``spark_conf`` looks for, so Spark's properties
can be checked without a JVM or ``make setup``."""

from __future__ import annotations

from lambdalake.settings import Settings


def with_spark_jars(settings: Settings) -> Settings:
    """``settings``, with the Delta jar ``spark_conf`` looks for placed in its (empty) jar
    directory; the settings themselves come from the unit tier's ``make_settings``."""
    jars = settings.spark_jars_dir
    jars.mkdir(parents=True, exist_ok=True)
    (jars / "delta-spark_4.2_2.13-4.4.0.jar").touch()
    return settings
