"""The events topic read as a stream, and classified: what ingest and the speed layer
both read (each micro-batch of either holds the same records, classified the same way).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from lambdalake.contracts.registry import ContractRegistry
from lambdalake.kafka.schema_registry import TopicSchemas
from lambdalake.settings import Settings
from lambdalake.streaming.classification import classify
from lambdalake.streaming.runner import PlanOutdated

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def kafka_stream(
    spark: SparkSession, settings: Settings, max_offsets_per_trigger: int | None = None,
    partitions: list[int] | None = None, tasks: int | None = None,
) -> DataFrame:
    """The events topic as a stream of Kafka records (the speed layer reads it too): all of
    its partitions, or only ``partitions`` (a speed shard's); each batch read in ``tasks``
    tasks at least (default: one per partition)."""
    ingest = settings.ingest
    topic = settings.kafka.events_topic.name
    source = (("assign", json.dumps({topic: partitions})) if partitions is not None
              else ("subscribe", topic))
    reader = (
        spark.readStream.format("kafka")
        .options(**settings.kafka.spark_options())
        .option(*source)
        .option("startingOffsets", ingest.starting_offsets)
        .option("failOnDataLoss", str(ingest.fail_on_data_loss).lower())
        .option("maxOffsetsPerTrigger",
                max_offsets_per_trigger or ingest.max_offsets_per_trigger)
    )
    if tasks is not None:
        reader = reader.option("minPartitions", tasks)
    return reader.load()


class ClassifiedStream:
    """The events topic as a stream of classified records (``classify``).

    The classification is part of the query's plan, built once when the query starts:
    built for each micro-batch it took about 0.6 s of each one's time. The Avro schemas it
    decodes are those registered then. Each micro-batch calls ``check`` first; one that
    finds the topic's schemas changed (a version registered since) raises ``PlanOutdated``
    and, having written nothing, runs again in the query ``run_until_stopped`` starts
    anew. A record is produced only after its schema is registered, and a micro-batch's
    offsets are fixed before it runs, so a batch that passed ``check`` holds no record whose
    schema its plan lacks."""

    def __init__(self, spark: SparkSession, settings: Settings, contracts: ContractRegistry,
                 max_offsets_per_trigger: int | None = None,
                 partitions: list[int] | None = None, tasks: int | None = None) -> None:
        self.schemas = TopicSchemas(settings.registry, contracts,
                                    settings.kafka.events_topic.name)
        self.planned = self.schemas.current()
        self.records = classify(
            kafka_stream(spark, settings, max_offsets_per_trigger, partitions, tasks),
            contracts, settings.ingest, self.planned)

    def check(self) -> None:
        """Raise ``PlanOutdated`` if the registered schemas outdate those planned with
        (``AvroSchemas.outdates``)."""
        now = self.schemas.current()
        if now.outdates(self.planned):
            raise PlanOutdated(f"the events topic's registered schemas changed (ids "
                               f"{sorted(self.planned.by_id)} -> {sorted(now.by_id)}, registry "
                               f"answered: {self.planned.complete} -> {now.complete})")
