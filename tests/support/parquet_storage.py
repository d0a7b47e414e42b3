"""How a lake table's Parquet files are stored, as far as ``FILE_WRITE_CONF`` decides it:
the physical type and unit of ``kafka_timestamp``, and which of ``UNIQUE_COLUMNS`` carry a
dictionary. Read from the files' footers, on local disk or object storage."""

from __future__ import annotations

import json

import pyarrow.parquet as pq

from lambdalake.lake.bronze import UNIQUE_COLUMNS
from lambdalake.lake.bronze_log import log_path
from lambdalake.lake.delta_rs import arrow_filesystem

WRITTEN_AS_INGEST_WRITES = ("INT64", "microseconds", ())
"""``file_storage`` of a file written with ``FILE_WRITE_CONF``."""


def file_storage(path: str) -> tuple[str, str | None, tuple[str, ...]]:
    """How the Parquet file at ``path`` stores ``kafka_timestamp`` (physical type, time
    unit), and which of ``UNIQUE_COLUMNS`` it dictionary-encodes."""
    filesystem, inner = arrow_filesystem(path)
    metadata = pq.ParquetFile(inner, filesystem=filesystem).metadata
    timestamp = metadata.schema.column(metadata.schema.names.index("kafka_timestamp"))
    encoded = {chunk.path_in_schema for group in range(metadata.num_row_groups)
               for chunk in (metadata.row_group(group).column(c)
                             for c in range(metadata.num_columns))
               if {"PLAIN_DICTIONARY", "RLE_DICTIONARY"} & set(chunk.encodings)}
    return (timestamp.physical_type, json.loads(timestamp.logical_type.to_json()).get("timeUnit"),
            tuple(sorted(encoded & set(UNIQUE_COLUMNS))))


def files_committed(table_path: str, version: int) -> list[str]:
    """The paths of the data files commit ``version`` of the table added."""
    filesystem, path = arrow_filesystem(log_path(table_path, version))
    with filesystem.open_input_stream(path) as commit:
        actions = [json.loads(line) for line in commit.read().decode().splitlines() if line]
    return [f"{table_path.rstrip('/')}/{action['add']['path']}"
            for action in actions if "add" in action]
