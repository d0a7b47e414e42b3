"""Settings whose jar directory holds what ``spark_conf`` looks for, so Spark's properties
can be checked without a JVM or ``make setup``."""

from __future__ import annotations

from pathlib import Path

from lambdalake.settings import Settings


def settings_with_jars(tmp_path: Path, **overrides: object) -> Settings:
    jars = tmp_path / "jars" / "spark-connectors"
    jars.mkdir(parents=True, exist_ok=True)
    (jars / "delta-spark_4.2_2.13-4.4.0.jar").touch()
    return Settings(state_dir=tmp_path, **overrides)
