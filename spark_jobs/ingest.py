"""Spark entry point of the ingest stream: Kafka -> bronze + quarantine, until stopped."""

from lambdalake.ingest.stream import INGEST_SPARK_CONF, run
from lambdalake.settings import get_settings
from lambdalake.spark import get_spark
from lambdalake.streaming.runner import log_to_stdout

if __name__ == "__main__":
    log_to_stdout()
    settings = get_settings()
    run(get_spark("ingest", settings, INGEST_SPARK_CONF), settings)
