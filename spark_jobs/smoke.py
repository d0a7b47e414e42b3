"""Spark entry point of the smoke pipeline: copy the smoke topic into Delta and check it."""

from lambdalake.orchestration.smoke import kafka_to_delta
from lambdalake.settings import get_settings
from lambdalake.spark import get_spark


def main() -> None:
    settings = get_settings()
    result = kafka_to_delta(get_spark("smoke", settings), settings)
    print(f"smoke: {result.table_rows} rows in Delta for {result.topic_records} Kafka records "
          f"(table version {result.table_version})")


if __name__ == "__main__":
    main()
