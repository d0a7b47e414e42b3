"""The slices a gate validates, read from Delta where they live: bronze's events of an
event-time interval, the records quarantined among an interval's arrivals, and a view's
rows of an interval. A slice that cannot be read fails its gate (``did_not_run``): a gate
never passes silently."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

import pyarrow as pa

from lambdalake.contracts.registry import ContractRegistry
from lambdalake.lake.bronze import (
    BRONZE_TABLE,
    QUARANTINE_TABLE,
    count_bronze_arrivals,
    read_bronze_interval,
    read_bronze_rows,
    read_quarantine_arrivals,
    read_quarantine_rows,
)
from lambdalake.lake.delta_rs import TimeSlice, read_small_slice, table_exists
from lambdalake.lake.reference import HISTORY_TABLE, read_history, read_history_rows
from lambdalake.quality.baseline import NO_BOUNDS, RowBounds
from lambdalake.quality.gate import run_suite_on, validate_bronze_frame, validate_view_frame
from lambdalake.quality.suites.common import interval_parameters
from lambdalake.quality.suites.entity import entity_suite
from lambdalake.quality.suites.quarantine import quarantine_max_rows, quarantine_suite
from lambdalake.quality.verdict import GateResult, did_not_run
from lambdalake.settings import Settings
from lambdalake.views.definition import ViewDefinition

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def validate_bronze_slice(
    spark: SparkSession, settings: Settings, start: datetime, end: datetime, *,
    version: int | None = None, require_rows: bool = False,
    contracts: ContractRegistry | None = None, views: dict[str, ViewDefinition] | None = None,
    row_count: RowBounds = NO_BOUNDS,
) -> GateResult:
    """Validate bronze's events in [start, end) (at table ``version``, default latest).

    A slice of up to ``quality.local_gate_max_rows`` rows is read with delta-rs and
    validated in this process, a larger one on Spark (as ``validate_view_slice``). An empty
    bronze slice is a warning unless ``require_rows`` (a dead hour is legitimate); so is a
    row count outside ``row_count`` (``lambdalake.quality.baseline``).
    """
    _check_interval(start, end)
    began = time.monotonic()
    try:
        frame: pa.Table | DataFrame | None = read_bronze_rows(
            settings, start, end, settings.quality.local_gate_max_rows, version=version)
        if frame is None:
            frame = read_bronze_interval(spark, settings, start, end, version=version)
    except Exception as error:  # noqa: BLE001 - a gate reports what it could not do, never raises
        return did_not_run("bronze", BRONZE_TABLE, start, end, error, began)
    return validate_bronze_frame(frame, start, end, require_rows=require_rows,
                                 contracts=contracts, views=views, began=began,
                                 row_count=row_count)


def validate_quarantine_slice(
    spark: SparkSession, settings: Settings, start: datetime, end: datetime,
) -> GateResult:
    """Validate the records quarantined among those that reached Kafka in [start, end),
    and their rate: at most ``quality.quarantine_max_rate`` of every record that arrived
    then (bronze's and quarantine's, counted by Kafka time). Read and validated in this
    process up to ``quality.local_gate_max_rows`` quarantined records, else on Spark."""
    _check_interval(start, end)
    began = time.monotonic()
    try:
        frame: pa.Table | DataFrame | None = read_quarantine_rows(
            settings, start, end, settings.quality.local_gate_max_rows)
        if frame is None:
            frame = read_quarantine_arrivals(spark, settings, start, end)
        quarantined = frame.num_rows if isinstance(frame, pa.Table) else frame.count()
        arrived = quarantined + count_bronze_arrivals(settings, start, end)
    except Exception as error:  # noqa: BLE001 - a gate reports what it could not do, never raises
        return did_not_run("bronze", QUARANTINE_TABLE, start, end, error, began)
    parameters = interval_parameters(
        start, end, quarantine_max_rows=quarantine_max_rows(
            arrived, settings.quality.quarantine_max_rate))
    return run_suite_on(frame, quarantine_suite(), layer="bronze", subject=QUARANTINE_TABLE,
                        start=start, end=end, began=began, parameters=parameters)


def validate_view_slice(
    spark: SparkSession, settings: Settings, view: ViewDefinition, table_path: str,
    start: datetime, end: datetime, *, require_rows: bool | None = None,
    bronze_version: int | None = None, contracts: ContractRegistry | None = None,
    row_count: RowBounds = NO_BOUNDS, bronze_types: Callable[[], set[str]] | None = None,
) -> GateResult:
    """Validate the rows of ``view``'s table at ``table_path`` whose window starts in [start, end).

    A slice of up to ``quality.local_gate_max_rows`` rows (a view's rows are aggregates: an
    hourly view has a few thousand a day) is read with delta-rs and validated in this
    process (``validate_view_frame`` of Arrow rows): for it, a Spark query's planning on
    the Delta log costs more than the work. A larger one is validated on Spark.

    ``require_rows``: must the slice have rows? Default (None): yes if bronze (at
    ``bronze_version``, default latest) has events of the view's types in [start, end). So
    an empty slice fails the gate when there was something to aggregate, and is only a
    warning for a dead interval. Callers that know the answer pass it and save a bronze read;
    callers gating several views pass ``bronze_types`` (``bronze_event_types``, cached) so
    bronze is read once for all of them.
    """
    from pyspark.sql import functions as F

    _check_interval(start, end)
    began = time.monotonic()
    try:
        rows: pa.Table | DataFrame | None = read_view_rows(
            table_path, start, end, settings.quality.local_gate_max_rows)
        if rows is None:
            rows = (spark.read.format("delta").load(table_path)
                    .where((F.col("window_start") >= F.lit(start))
                           & (F.col("window_start") < F.lit(end))))
        if require_rows is None:
            present = (bronze_types or functools.partial(
                bronze_event_types, spark, settings, start, end, bronze_version))()
            require_rows = bool(present & set(view.event_types))
    except Exception as error:  # noqa: BLE001 - a gate reports what it could not do, never raises
        return did_not_run("batch", view.name, start, end, error, began)
    return validate_view_frame(rows, view, start, end, require_rows=require_rows,
                               contracts=contracts, began=began, row_count=row_count,
                               orphan_max_share=settings.quality.orphan_max_rate)


def gate_staged_slice(
    spark: SparkSession, settings: Settings, view: ViewDefinition, table_path: str,
    start: datetime, end: datetime, bronze_version: int, run_id: str,
) -> GateResult:
    """The view gate of one slice outside a gate step (a full reprocess's carried slice):
    validated as ``validate_view_slice`` does, against the view's usual row count, and
    recorded in the history with its page, as a gate step records its own."""
    from lambdalake.quality.baseline import usual_row_count
    from lambdalake.quality.docs import record_with_pages
    from lambdalake.quality.history import read_row_counts

    bounds = usual_row_count(read_row_counts(settings, "batch"), "batch", view.name, start, end,
                             settings.quality)
    result = validate_view_slice(spark, settings, view, table_path, start, end,
                                 bronze_version=bronze_version, row_count=bounds)
    record_with_pages([result], settings, run_id=run_id)
    return result


def read_view_rows(table_path: str, start: datetime, end: datetime, max_rows: int
                   ) -> pa.Table | None:
    """The rows of the view table at ``table_path`` whose window starts in [start, end),
    read with delta-rs (partitions pruned; no Spark); None if there are more than
    ``max_rows`` (``read_small_slice``)."""
    return read_small_slice(table_path, TimeSlice("window_start", start, end), max_rows)


def validate_reference_history(
    spark: SparkSession, settings: Settings, entity: str, start: datetime, end: datetime,
) -> GateResult:
    """Validate ``entity``'s whole history (``entity_suite``), recorded for the run's
    interval [start, end): the enriched views of that interval join it. Before any change
    of the entity arrived there is nothing to validate: a passed gate of no rows. Read and
    validated in this process up to ``quality.local_gate_max_rows`` versions, else on Spark."""
    _check_interval(start, end)
    began = time.monotonic()
    subject = f"{HISTORY_TABLE}:{entity}"
    try:
        frame: pa.Table | DataFrame | None = None
        if table_exists(settings.table_path(HISTORY_TABLE)):
            frame = read_history_rows(settings, entity, settings.quality.local_gate_max_rows)
            if frame is None:
                frame = read_history(spark, settings, entity)
    except Exception as error:  # noqa: BLE001 - a gate reports what it could not do, never raises
        return did_not_run("reference", subject, start, end, error, began)
    if frame is None:
        return GateResult("reference", subject, start, end, success=True, critical_failures=[],
                          warnings=[], evaluated=0, rows=0, seconds=time.monotonic() - began)
    return run_suite_on(frame, entity_suite(entity), layer="reference", subject=subject,
                        start=start, end=end, began=began)


def bronze_event_types(
    spark: SparkSession, settings: Settings, start: datetime, end: datetime,
    version: int | None = None,
) -> set[str]:
    """The event types bronze (at ``version``, default latest) has in [start, end): read
    with delta-rs up to ``quality.local_gate_max_rows`` events, else on Spark."""
    local = read_bronze_rows(settings, start, end, settings.quality.local_gate_max_rows,
                             version=version, columns=["event_type"])
    if local is not None:
        return set(local.column("event_type").unique().to_pylist())
    events = read_bronze_interval(spark, settings, start, end, version=version)
    return {row["event_type"] for row in events.select("event_type").distinct().collect()}


def _check_interval(start: datetime, end: datetime) -> None:
    if start.tzinfo is None or end.tzinfo is None:
        raise ValueError("interval bounds must be timezone-aware (UTC)")
    if end <= start:
        raise ValueError(f"empty interval [{start}, {end})")
