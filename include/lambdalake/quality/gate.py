"""Quality gates: run a suite against a Spark DataFrame where it lives, and decide.

A gate validates one slice (bronze, or one view) for an event-time interval [start, end)
with Great Expectations' Spark engine: the DataFrame is the batch parameter of a
whole-dataframe batch definition of an in-memory GX context, so metrics are Spark
aggregations on the cluster and only numbers (and a few sample values of failures) reach
the driver. A view slice small enough to hold in the task's memory (a view's rows are
aggregates) is validated there instead, with the same suite on GX's pandas engine
(``run_suite_locally``): on a few hundred rows, Spark's planning on the Delta log (finding
the slice's files in a table a write has just changed) cost more than the validation.

The gate never passes silently. It fails (``success=False``) when a critical expectation
fails, and also when validation did not really run: GX or Spark raised, the slice could
not be read, no expectation was evaluated, an expectation of the suite has no result, or
any expectation (whatever its severity) reports a raised exception (a missing column, a
bad query). Warnings are recorded and do not block.

Cost. GX computes metrics as Spark jobs: one aggregation per metric domain, plus the row
count and two jobs per uniqueness check. The suites keep to one domain: every rule is a
column-map expectation without a row condition (a rule that would need a row condition or
a SQL query is a derived column instead: the suite's ``derived_columns``, added here), so
GX bundles them all into a single ``df.agg(...)``. Before validating, the slice is
projected to the columns the suite reads (bronze's raw bytes are not cached), cached, and
counted (``rows``; the read and the computation happen once, every metric job then scans
memory). A slice of up to ``SINGLE_PARTITION_ROWS`` rows is validated as one partition, so
a global aggregation needs no shuffle. A session that only runs gates also turns adaptive
execution off and caches uncompressed (``GATE_SPARK_CONF``). A view gate is then about 6
Spark jobs, a bronze gate about 6. Validation runs in two passes: the first with ``BASIC``
results and no sample values (``FIRST_PASS``), which keeps the observed values GX
computes for a verdict anyway (row counts, unexpected and null percentages, a column's
maximum; ``BOOLEAN_ONLY`` dropped them, and Data Docs showed "--" and "unknown % null")
and asks Spark for no sample (GX's query for them is limited to 0 rows, which Spark
answers without a job, though planning those queries costs a Spark gate's driver about a
second: docs/decisions.md); only if something failed, a second pass over the failing
expectations collects a few sample unexpected values (``BASIC``; ``COMPLETE`` for a SQL
check, whose rows are the samples). A passing gate never pays for samples.

The slices come from ``lambdalake.quality.slices``; the verdict is a ``GateResult``
(``lambdalake.quality.verdict``, which needs no GX).

>>> result = validate_view_frame(frame, view, start, end)   # doctest: +SKIP
>>> enforce(result)                     # raises GateFailed listing what failed   # doctest: +SKIP
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

import great_expectations as gx  # the package's __init__ silenced GX analytics first

from lambdalake.contracts.registry import ContractRegistry
from lambdalake.lake.bronze import (
    BRONZE_TABLE,
)
from lambdalake.quality.baseline import NO_BOUNDS, RowBounds
from lambdalake.quality.suites.bronze import bronze_suite
from lambdalake.quality.suites.common import (
    CRITICAL,
    DUCKDB_MACROS,
    check_name,
    derived_columns,
    interval_parameters,
)
from lambdalake.quality.suites.view import view_suite
from lambdalake.quality.verdict import ExpectationOutcome, GateResult, did_not_run, json_ready
from lambdalake.views.definition import ViewDefinition

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa
    from great_expectations.core import ExpectationSuiteValidationResult
    from great_expectations.core.batch_definition import BatchDefinition
    from great_expectations.core.expectation_validation_result import (
        ExpectationValidationResult,
    )
    from pyspark.sql import DataFrame

SAMPLE_SIZE = 5
"""Sample unexpected values (or rows) kept per failing expectation."""
GATE_SPARK_CONF = {
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.inMemoryColumnarStorage.compressed": "false",
}
"""Spark settings of a session that only runs gates (``spark_jobs/validate.py``): adaptive
execution re-plans every small query and runs each shuffle stage as a job of its own; on
cached slices it made a gate about three times slower. The slice is cached uncompressed:
building the compressed cache was half of a large bronze gate, and its columns (ids,
timestamps, offsets) hardly compress (a 1,979,912-row bronze slice: 161 MiB compressed,
187 MiB not; the bronze gate 6.5-6.7 s instead of 7.4-8.1 s, four interleaved warm
rounds, 2026-11-29)."""
SINGLE_PARTITION_ROWS = 2_000_000
"""Slices up to this many rows are validated as one partition (see ``run_suite``)."""
ResultFormat = Literal["BOOLEAN_ONLY", "BASIC", "SUMMARY", "COMPLETE"] | dict[str, Any]
"""How much GX reports per expectation."""
FIRST_PASS: ResultFormat = {"result_format": "BASIC", "partial_unexpected_count": 0}
"""The first pass's results: observed values, no samples (see the module docstring)."""
_SQL_CHECK = "unexpected_rows_expectation"
_GX = threading.local()


def validate_bronze_frame(
    frame: DataFrame | pa.Table, start: datetime, end: datetime, *, require_rows: bool = False,
    contracts: ContractRegistry | None = None, views: dict[str, ViewDefinition] | None = None,
    began: float | None = None, row_count: RowBounds = NO_BOUNDS,
) -> GateResult:
    """Validate bronze rows as the slice [start, end): a Spark DataFrame or Arrow rows
    (``run_suite_on``)."""
    suite = bronze_suite(contracts, views, require_rows=require_rows)
    return run_suite_on(frame, suite, layer="bronze", subject=BRONZE_TABLE, start=start,
                        end=end, began=began, parameters=interval_parameters(start, end, row_count))


def validate_view_frame(
    frame: DataFrame | pa.Table, view: ViewDefinition, start: datetime, end: datetime, *,
    require_rows: bool = True, contracts: ContractRegistry | None = None,
    began: float | None = None, row_count: RowBounds = NO_BOUNDS,
    orphan_max_share: float | None = None,
) -> GateResult:
    """Validate ``view`` rows as its slice [start, end): a Spark DataFrame or Arrow rows
    (``run_suite_on``)."""
    suite = view_suite(view, contracts, require_rows=require_rows)
    return run_suite_on(frame, suite, layer="batch", subject=view.name, start=start, end=end,
                        began=began, parameters=interval_parameters(
                            start, end, row_count, orphan_max_share=orphan_max_share))


# --- running a suite ------------------------------------------------------------------------


def run_suite_on(
    frame: DataFrame | pa.Table, suite: gx.ExpectationSuite, *, layer: str, subject: str,
    start: datetime, end: datetime, began: float | None = None,
    parameters: dict[str, Any] | None = None,
) -> GateResult:
    """``run_suite`` for a Spark DataFrame (validated where it lives), ``run_suite_locally``
    for Arrow rows held in memory (validated without Spark); never raises."""
    import pyarrow as pa

    run = run_suite_locally if isinstance(frame, pa.Table) else run_suite
    return run(frame, suite, layer=layer, subject=subject, start=start, end=end, began=began,
               parameters=parameters)


def run_suite(
    frame: DataFrame, suite: gx.ExpectationSuite, *, layer: str, subject: str,
    start: datetime, end: datetime, sample_size: int = SAMPLE_SIZE, began: float | None = None,
    parameters: dict[str, Any] | None = None,
) -> GateResult:
    """Validate ``frame`` with ``suite`` for the slice [start, end) (suite ``parameters``:
    default ``interval_parameters(start, end)``); never raises."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    began = time.monotonic() if began is None else began
    cached = None
    try:
        derived = derived_columns(suite)
        if derived:
            frame = frame.withColumns({name: F.expr(sql) for name, sql in derived.items()})
        needed = suite_columns(suite)
        if needed is not None:  # cache only what the suite reads (not bronze's raw bytes)
            frame = frame.select(*(c for c in frame.columns if c in needed))
        cached = frame.persist(StorageLevel.MEMORY_AND_DISK)
        rows = cached.count()
        # one partition: GX's aggregations then need no shuffle (one Spark job, not two)
        validated = cached.coalesce(1) if rows <= SINGLE_PARTITION_ROWS else cached
        critical, warnings, evaluated, validation = validate_in_two_passes(
            _batch_definition(), validated, suite,
            parameters or interval_parameters(start, end), sample_size)
    except Exception as error:  # noqa: BLE001 - a gate reports what it could not do, never raises
        return did_not_run(layer, subject, start, end, error, began)
    finally:
        if cached is not None:
            try:
                cached.unpersist()
            except Exception:  # noqa: BLE001 - a dead session must not hide the verdict
                pass
    return GateResult(layer, subject, start, end, success=not critical,
                      critical_failures=critical, warnings=warnings, evaluated=evaluated,
                      rows=rows, seconds=time.monotonic() - began, validation=validation)


def run_suite_locally(
    rows: pa.Table, suite: gx.ExpectationSuite, *, layer: str, subject: str,
    start: datetime, end: datetime, sample_size: int = SAMPLE_SIZE, began: float | None = None,
    parameters: dict[str, Any] | None = None,
) -> GateResult:
    """``run_suite`` for rows held in memory: the suite's derived columns computed by DuckDB
    from the same SQL, GX's pandas engine. For slices small enough that a Spark query would
    cost more in planning than in work; never raises."""
    began = time.monotonic() if began is None else began
    try:
        frame = with_derived_columns(rows, derived_columns(suite))
        critical, warnings, evaluated, validation = validate_in_two_passes(
            pandas_batch_definition(), frame, suite,
            parameters or interval_parameters(start, end), sample_size)
        for result in validation.results:
            result.result = python_numbers(result.result)
    except Exception as error:  # noqa: BLE001 - a gate reports what it could not do, never raises
        return did_not_run(layer, subject, start, end, error, began)
    return GateResult(layer, subject, start, end, success=not critical,
                      critical_failures=critical, warnings=warnings, evaluated=evaluated,
                      rows=rows.num_rows, seconds=time.monotonic() - began, validation=validation)


def python_numbers(value: Any) -> Any:
    """``value`` with numpy's numbers (in dicts and lists) as Python's. GX's pandas engine
    observes numpy scalars, which GX's Data Docs renderer cannot format under numpy 2 (it
    parses ``repr``: 'np.float64(1.0)'); the page then showed an error for the value."""
    import numpy as np

    if isinstance(value, dict):
        return {key: python_numbers(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [python_numbers(item) for item in value]
    if isinstance(value, np.number | np.bool_):
        return value.item()
    return value


def with_derived_columns(rows: pa.Table, derived: dict[str, str]) -> pd.DataFrame:
    """``rows`` as pandas, plus a suite's derived columns computed by DuckDB (its macros
    give the Spark functions the suites' SQL uses). Time zone-aware timestamps go in as
    UTC wall-clock time and come out aware again, so a derived text (a wrong window's
    'start .. end') reads as Spark writes it, without a '+00' suffix."""
    import duckdb
    import pyarrow as pa

    aware = [field.name for field in rows.schema
             if pa.types.is_timestamp(field.type) and field.type.tz is not None]
    wall_clock = rows.cast(pa.schema([
        field.with_type(pa.timestamp(field.type.unit)) if field.name in aware else field
        for field in rows.schema]))
    with duckdb.connect() as connection:
        connection.execute("SET TimeZone = 'UTC'")
        for macro in DUCKDB_MACROS:
            connection.execute(macro)
        connection.register("new_rows", wall_clock)
        extra = "".join(f", {sql} AS \"{name}\"" for name, sql in derived.items())
        # through Arrow, not ``df()``: DuckDB's pandas conversion turns decimals into floats
        frame = connection.sql(f"SELECT *{extra} FROM new_rows").to_arrow_table().to_pandas()
    for column in aware:
        frame[column] = frame[column].dt.tz_localize("UTC")
    return frame


def validate_in_two_passes(
    batch_definition: BatchDefinition[Any], frame: Any, suite: gx.ExpectationSuite,
    parameters: dict[str, Any], sample_size: int = SAMPLE_SIZE,
) -> tuple[list[ExpectationOutcome], list[ExpectationOutcome], int,
           ExpectationSuiteValidationResult]:
    """Critical failures, warnings, the evaluated count and GX's validation result of
    ``suite`` on ``frame`` (a Spark or a pandas DataFrame, as ``batch_definition``'s data
    source expects): a pass with observed values (``FIRST_PASS``), then, only if something
    failed, a second pass over the failing expectations for samples. Raises what GX raises;
    callers turn that into a failed result (``did_not_run``)."""
    validation = _validate(batch_definition, frame, suite, FIRST_PASS, parameters)
    critical, warnings, evaluated = interpret(suite, validation)
    failing = [o.check for o in [*critical, *warnings] if o.error is None]
    if failing:
        details = _details(batch_definition, frame, suite, failing, parameters, sample_size)
        critical = [_with_details(o, details, sample_size) for o in critical]
        warnings = [_with_details(o, details, sample_size) for o in warnings]
        validation.results = [details.get(result_check(r), r) for r in validation.results]
    return critical, warnings, evaluated, validation


def result_check(result: ExpectationValidationResult) -> str:
    """The check name (``meta['check']``) of one expectation's result."""
    config = result.expectation_config
    return str((config.meta or {}).get("check", config.type)) if config else "(unknown)"


def interpret(
    suite: gx.ExpectationSuite, validation: ExpectationSuiteValidationResult
) -> tuple[list[ExpectationOutcome], list[ExpectationOutcome], int]:
    """Critical failures, warnings and the evaluated count of a GX validation result.

    An expectation that raised is a critical failure whatever its severity (the gate could
    not check it); so is an expectation of the suite without a result, and so is a
    validation that evaluated nothing.
    """
    evaluated = int((validation.statistics or {}).get("evaluated_expectations") or 0)
    critical: list[ExpectationOutcome] = []
    warnings: list[ExpectationOutcome] = []
    expected = {check_name(e): e for e in suite.expectations}
    seen: set[str] = set()
    for result in validation.results:
        check = result_check(result)
        seen.add(check)
        error = raised_exception(result.exception_info)
        if error is None and result.success:
            continue
        outcome = _outcome(result, check, error)
        if error is not None or outcome.severity == CRITICAL.value:
            critical.append(outcome)
        else:
            warnings.append(outcome)
    for check in sorted(set(expected) - seen):
        critical.append(_outcome_of(expected[check], error="no result: not evaluated"))
    if evaluated == 0 or not validation.results:
        critical.append(ExpectationOutcome(
            "validation", "(gate)", None, CRITICAL.value,
            "a gate must evaluate its suite", error="no expectation was evaluated"))
    return critical, warnings, evaluated


def suite_columns(suite: gx.ExpectationSuite) -> set[str] | None:
    """Every column ``suite`` reads, or None if that is unknown (a SQL check may read any)."""
    columns: set[str] = set(derived_columns(suite))
    for expectation in suite.expectations:
        if expectation.expectation_type == _SQL_CHECK:
            return None
        kwargs = expectation.configuration.kwargs
        columns |= {kwargs["column"]} if kwargs.get("column") else set()
        columns |= set(kwargs.get("column_list") or ()) | set(kwargs.get("column_set") or ())
        if kwargs.get("row_condition") is not None:
            return None  # its columns are inside the condition
    return columns


def raised_exception(exception_info: Any) -> str | None:
    """The message if GX reports a raised exception (flat, or per metric), else None."""
    if not exception_info:
        return None
    if not isinstance(exception_info, Mapping):
        return str(exception_info)
    if "raised_exception" in exception_info:
        if not exception_info.get("raised_exception"):
            return None
        return str(exception_info.get("exception_message") or "exception raised")
    messages = [
        str(info.get("exception_message") or "exception raised")
        for info in exception_info.values()
        if isinstance(info, Mapping) and info.get("raised_exception", True)
    ]
    return "; ".join(dict.fromkeys(messages)) or None


def _batch_definition() -> BatchDefinition[Any]:
    """A whole-dataframe batch definition of an in-memory GX context (no disk, no network,
    no progress bars; GX reuses the active SparkSession and does not cache the data).

    Built once per thread and SparkSession (about 0.2 s each time otherwise)."""
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    cached = getattr(_GX, "cached", None)
    if cached is not None and cached[0] is session:
        reused: BatchDefinition[Any] = cached[1]
        return reused
    source = _ephemeral_context().data_sources.add_spark(name="lambdalake", persist=False)
    asset = source.add_dataframe_asset(name="slice")
    batch_definition: BatchDefinition[Any] = asset.add_batch_definition_whole_dataframe(
        "whole slice")
    _GX.cached = (session, batch_definition)
    return batch_definition


def pandas_batch_definition() -> BatchDefinition[Any]:
    """The same for pandas DataFrames, for gates that run without a JVM (the real-time
    gate). Built once per thread: a context costs about a second of CPU."""
    cached: BatchDefinition[Any] | None = getattr(_GX, "pandas", None)
    if cached is not None:
        return cached
    source = _ephemeral_context().data_sources.add_pandas(name="lambdalake")
    asset = source.add_dataframe_asset(name="rows")
    batch_definition: BatchDefinition[Any] = asset.add_batch_definition_whole_dataframe(
        "all rows")
    _GX.pandas = batch_definition
    return batch_definition


def _ephemeral_context() -> Any:
    """An in-memory GX context: nothing on disk, no analytics, no progress bars, no network."""
    from great_expectations.data_context.types.base import (
        DataContextConfig,
        InMemoryStoreBackendDefaults,
        ProgressBarsConfig,
    )

    return gx.get_context(mode="ephemeral", project_config=DataContextConfig(
        store_backend_defaults=InMemoryStoreBackendDefaults(init_temp_docs_sites=False),
        analytics_enabled=False,
        progress_bars=ProgressBarsConfig(globally=False),
    ))


def _validate(
    batch_definition: BatchDefinition[Any], frame: Any, suite: gx.ExpectationSuite,
    result_format: ResultFormat, parameters: dict[str, Any],
) -> ExpectationSuiteValidationResult:
    batch = batch_definition.get_batch(batch_parameters={"dataframe": frame})
    return batch.validate(suite, result_format=result_format, expectation_parameters=parameters)


def _details(
    batch_definition: BatchDefinition[Any], frame: Any, suite: gx.ExpectationSuite,
    checks: list[str], parameters: dict[str, Any], sample_size: int,
) -> dict[str, ExpectationValidationResult]:
    """Second pass over the failing expectations only: samples (and observed values)."""
    wanted = [e for e in suite.expectations if check_name(e) in checks]
    groups: list[tuple[list[Any], ResultFormat]] = [
        ([e for e in wanted if e.expectation_type != _SQL_CHECK],
         {"result_format": "BASIC", "partial_unexpected_count": sample_size}),
        ([e for e in wanted if e.expectation_type == _SQL_CHECK], "COMPLETE"),
    ]
    details: dict[str, ExpectationValidationResult] = {}
    for expectations, result_format in groups:
        if not expectations:
            continue
        subset = gx.ExpectationSuite(name=f"{suite.name}-details",
                                     expectations=[e.configuration for e in expectations])
        try:
            validation = _validate(batch_definition, frame, subset, result_format, parameters)
        except Exception:  # noqa: BLE001 - the verdict stands; only the samples are lost
            continue
        for result in validation.results:
            details[result_check(result)] = result
    return details


def _outcome(result: ExpectationValidationResult, check: str, error: str | None
             ) -> ExpectationOutcome:
    config = result.expectation_config
    kwargs = dict(config.kwargs) if config else {}
    meta = (config.meta or {}) if config else {}
    severity = getattr(config, "severity", None) or CRITICAL
    return ExpectationOutcome(
        check=check, expectation=config.type if config else "(unknown)",
        column=meta.get("column") or _column(kwargs),
        severity=getattr(severity, "value", str(severity)),
        rule=str(meta.get("rule", "")), bounds=bounds(kwargs), error=error,
    )


def bounds(kwargs: dict[str, Any]) -> str:
    """``at most 0.2``, ``at least 1``, ``between 0 and 5``: an expectation's bounds as GX
    evaluated them (its parameters resolved), "" for one without."""
    low, high = kwargs.get("min_value"), kwargs.get("max_value")
    if isinstance(low, dict) or isinstance(high, dict):  # an unresolved parameter
        return ""
    if low is not None and high is not None:
        return f"between {low} and {high}"
    if high is not None:
        return f"at most {high}"
    return "" if low is None else f"at least {low}"


def _outcome_of(expectation: Any, error: str) -> ExpectationOutcome:
    meta = expectation.meta or {}
    return ExpectationOutcome(
        check=check_name(expectation), expectation=expectation.expectation_type,
        column=meta.get("column") or _column(expectation.configuration.kwargs),
        severity=CRITICAL.value, rule=str(meta.get("rule", "")), error=error,
    )


def _with_details(outcome: ExpectationOutcome, details: dict[str, Any], sample_size: int
                  ) -> ExpectationOutcome:
    result = details.get(outcome.check)
    if result is None or outcome.error is not None:
        return outcome
    values = dict(result.result or {})
    samples: list[Any] = list(values.get("partial_unexpected_list") or [])
    detail = values.get("details") or {}
    if not samples and isinstance(detail, Mapping):
        if "unexpected_rows" in detail:
            samples = list(detail["unexpected_rows"])
        elif "mismatched" in detail:
            samples = list((detail["mismatched"] or {}).get("missing") or [])
    count = values.get("unexpected_count")
    return replace(outcome, observed=json_ready(values.get("observed_value")),
                   unexpected_count=None if count is None else int(count),
                   samples=json_ready(samples[:sample_size]))


def _column(kwargs: Mapping[str, Any]) -> str | None:
    if kwargs.get("column"):
        return str(kwargs["column"])
    if kwargs.get("column_list"):
        return ",".join(map(str, kwargs["column_list"]))
    return None
