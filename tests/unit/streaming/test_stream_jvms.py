"""How the streams' Spark JVMs (ingest, the speed layer) are started."""

from __future__ import annotations

import runpy
import sys
from types import SimpleNamespace
from typing import Any

import pytest
from pyspark.sql import SparkSession

import lambdalake.ingest.stream
import lambdalake.settings
import lambdalake.speed.stream
from tests.support.repo import REPO
from tests.support.settings_factory import MakeSettings
from tests.support.spark_settings import with_spark_jars

STREAMS = {"ingest": lambdalake.ingest.stream, "speed": lambdalake.speed.stream}


class RecordingBuilder:
    """Stands for ``SparkSession.builder``: keeps the properties a session is built with."""

    def __init__(self) -> None:
        self.conf: dict[str, str] = {}

    def config(self, key: str, value: str) -> RecordingBuilder:
        self.conf[key] = value
        return self

    def getOrCreate(self) -> Any:
        return SimpleNamespace(sparkContext=SimpleNamespace(setLogLevel=lambda level: None))


def entry_point_conf(monkeypatch: pytest.MonkeyPatch, make_settings: MakeSettings, stream: str,
                     extra_conf: dict[str, str]) -> dict[str, str]:
    """The Spark properties ``spark_jobs/<stream>.py`` builds its session with, through
    the platform's own ``get_spark``."""
    settings = with_spark_jars(make_settings(spark={"extra_conf": extra_conf}))
    builder = RecordingBuilder()
    monkeypatch.setattr(lambdalake.settings, "get_settings", lambda: settings)
    monkeypatch.setattr(SparkSession, "builder", builder)
    monkeypatch.setenv("SPARK_LOCAL_IP", settings.spark.driver_host)
    monkeypatch.setattr(STREAMS[stream], "run", lambda *args: None)
    monkeypatch.setattr(sys, "argv", [f"{stream}.py"])
    runpy.run_path(str(REPO / "spark_jobs" / f"{stream}.py"), run_name="__main__")
    assert builder.conf["spark.app.name"] == f"lambdalake-{stream}"
    return builder.conf


@pytest.mark.parametrize("side", ["driver", "executor"])
@pytest.mark.parametrize("stream", sorted(STREAMS))
def test_streams_collect_garbage_for_throughput_and_still_compile_huge_methods(
    monkeypatch: pytest.MonkeyPatch, make_settings: MakeSettings, stream: str, side: str,
) -> None:
    """The streams' options replace the platform's default Java options, so they must keep
    the flag that JIT-compiles the classification stage's generated method; a deployment's
    own options are added after them."""
    conf = entry_point_conf(monkeypatch, make_settings, stream,
                            {f"spark.{side}.extraJavaOptions": "-Xss4m"})
    options = conf[f"spark.{side}.defaultJavaOptions"].split()
    assert "-XX:+UseParallelGC" in options
    assert "-XX:MetaspaceSize=256m" in options  # no full collection for class metadata
    assert "-XX:-DontCompileHugeMethods" in options
    assert conf[f"spark.{side}.extraJavaOptions"] == "-Xss4m"


def test_a_deployments_default_java_options_do_not_replace_a_streams(
    monkeypatch: pytest.MonkeyPatch, make_settings: MakeSettings,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level("WARNING", logger="lambdalake.spark"):
        conf = entry_point_conf(monkeypatch, make_settings, "speed",
                                {"spark.driver.defaultJavaOptions": "-XX:+UseG1GC"})
    assert "-XX:+UseParallelGC" in conf["spark.driver.defaultJavaOptions"].split()
    assert "sets spark.driver.defaultJavaOptions='-XX:+UseG1GC'; the speed job" in caplog.text
