"""How ingest's Spark JVMs are started."""

from __future__ import annotations

from pathlib import Path

import pytest

from lambdalake.ingest.stream import INGEST_SPARK_CONF
from lambdalake.spark import spark_conf
from tests.support.spark_settings import settings_with_jars


@pytest.mark.parametrize("side", ["driver", "executor"])
def test_ingest_collects_garbage_for_throughput_and_still_compiles_huge_methods(
    tmp_path: Path, side: str,
) -> None:
    """Ingest's options replace the platform's default Java options, so they must keep the
    flag that JIT-compiles the classification stage's generated method."""
    conf = spark_conf("ingest", settings_with_jars(tmp_path), INGEST_SPARK_CONF)
    options = conf[f"spark.{side}.defaultJavaOptions"].split()
    assert "-XX:+UseParallelGC" in options
    assert "-XX:-DontCompileHugeMethods" in options
