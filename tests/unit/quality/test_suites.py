"""Quality suites are generated from the real contracts and view definitions (no Spark)."""

from __future__ import annotations

import importlib.util
import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml

from lambdalake.contracts.registry import ContractRegistry
from lambdalake.quality.docs import record_with_pages
from lambdalake.quality.gate import interpret, raised_exception
from lambdalake.quality.history import read_results, record, results_path
from lambdalake.quality.report import found
from lambdalake.quality.suites.bronze import bronze_suite
from lambdalake.quality.suites.common import (
    DUCKDB_MACROS,
    INTERVAL_END,
    INTERVAL_START,
    ORPHAN_MAX_SHARE,
    WARNING,
    check_name,
    derived_columns,
    expect_on,
    interval_parameters,
    is_derived,
    new_suite,
)
from lambdalake.quality.suites.view import view_suite, wrong_window
from lambdalake.quality.verdict import ExpectationOutcome, GateFailed, GateResult, enforce
from lambdalake.settings import Settings
from lambdalake.views.definition import ViewDefinition, load_views, views_dir
from tests.support.repo import REPO

START = datetime(2026, 11, 20, 10, tzinfo=UTC)
END = START + timedelta(hours=1)


def by_check(suite: Any) -> dict[str, Any]:
    return {check_name(e): e for e in suite.expectations}


def test_the_bronze_suite_follows_the_contracts() -> None:
    contracts = ContractRegistry()
    suite = bronze_suite(contracts)
    checks = by_check(suite)
    for column in ("event_id", "event_type", "occurred_at", "topic", "partition", "offset"):
        not_null = checks[f"not_null:{column}"]
        assert not_null.expectation_type == "expect_column_values_to_not_be_null"
        assert not_null.severity.value == "critical"
    unique = checks["unique:topic,partition,offset"]
    assert unique.expectation_type == "expect_compound_columns_to_be_unique"
    assert unique.column_list == ["topic", "partition", "offset"]
    assert checks["in_set:event_type"].value_set == contracts.event_types
    interval = checks["in_interval:occurred_at"]
    assert (interval.min_value, interval.max_value, interval.strict_max) == (
        {"$PARAMETER": INTERVAL_START}, {"$PARAMETER": INTERVAL_END}, True)
    assert checks["in_set:currency"].value_set == ["EUR", "GBP", "USD"]
    assert (checks["range:amount"].min_value, checks["range:amount"].max_value) == (0, 1_000_000)
    assert checks["range:quantity"].min_value == 1
    # a field only some types require is checked on those types' rows, with a derived
    # column naming each event that lacks it
    page = checks["not_null:page[page_view]"]
    assert page.expectation_type == "expect_column_values_to_be_null"
    assert (page.column, page.meta["column"]) == ("_missing_page", "page")
    assert derived_columns(suite)["_missing_page"].startswith(
        "CASE WHEN event_type IN ('page_view') AND `page` IS NULL")
    assert derived_columns(suite)["_missing_product_id"].startswith(
        "CASE WHEN event_type IN ('add_to_cart', 'purchase') AND `product_id` IS NULL")
    assert "not_null:amount[purchase]" in checks and "not_null:amount" not in checks
    assert "columns" in checks and "not_empty" in checks


def test_bronze_severities_follow_what_the_views_read() -> None:
    checks = by_check(bronze_suite())
    severity = {name: e.severity.value for name, e in checks.items()}
    assert severity["in_set:currency"] == severity["range:amount"] == "critical"
    assert severity["not_null:page[page_view]"] == "critical"
    assert severity["in_set:device"] == severity["range:schema_version"] == "warning"  # no view
    assert severity["not_empty"] == "warning"  # a dead hour is legitimate
    assert severity["row_count:usual"] == "warning"  # an anomaly is worth a look, not a block
    assert by_check(bronze_suite(require_rows=True))["not_empty"].severity.value == "critical"
    # once a view reads device, its checks block
    views = load_views()
    device_view = views["product_sales"].model_copy(update={"name": "by_device",
                                                            "dimensions": ["device"]})
    checks = by_check(bronze_suite(views={**views, "by_device": device_view}))
    assert checks["in_set:device"].severity.value == "critical"


@pytest.mark.parametrize("name", ["page_traffic", "product_sales", "funnel"])
def test_every_view_gets_its_suite(name: str) -> None:
    view = load_views()[name]
    suite = view_suite(view)
    checks = by_check(suite)
    assert suite.name == f"view_{name}"
    assert checks["not_empty"].expectation_type == "expect_table_row_count_to_be_between"
    assert checks["not_empty"].min_value == 1 and checks["not_empty"].severity.value == "critical"
    unique = checks["unique:" + ",".join(view.key)]
    assert unique.expectation_type == "expect_compound_columns_to_be_unique"
    assert unique.column_list == view.key
    for dimension in view.dimensions:  # every default view's types require its dimensions
        assert checks[f"not_null:{dimension}"].severity.value == "critical"
    assert checks["in_interval:window_start"].strict_max is True
    assert checks["window"].column == "_window"
    assert f"INTERVAL {view.grain_seconds} SECONDS" in derived_columns(suite)["_window"]
    for measure in view.measures:
        if measure.kind in ("count", "distinct_count"):
            assert checks[f"range:{measure.name}"].min_value == 0
            assert f"not_null:{measure.name}" in checks
    for column in ("run_id", "bronze_version", "computed_at"):
        assert checks[f"not_null:{column}"].severity.value == "warning"
    for expectation in suite.expectations:
        assert expectation.severity.value in ("critical", "warning")
        assert expectation.meta["rule"]
    assert view_suite(view, require_rows=False).expectations[0].severity.value == "warning"
    usual = checks["row_count:usual"]
    assert usual.severity.value == "warning"
    assert (usual.min_value, usual.max_value) == ({"$PARAMETER": "row_count_min"},
                                                  {"$PARAMETER": "row_count_max"})


def test_sums_and_extremes_take_their_bounds_from_the_contract() -> None:
    checks = by_check(view_suite(load_views()["product_sales"]))
    assert (checks["range:revenue"].min_value, checks["range:revenue"].max_value) == (0, None)
    assert checks["range:units"].min_value == 1  # a sum of quantities >= 1
    assert (checks["range:largest_order"].min_value,
            checks["range:largest_order"].max_value) == (0, 1_000_000)
    assert checks["in_set:currency"].value_set == ["EUR", "GBP", "USD"]


def test_a_new_view_gets_a_suite_without_hand_work(tmp_path: Path) -> None:
    for name, changes in {
        "device_sales": {"dimensions": ["device"]},
        # page_view has no product_id: a null product_id is by design, so no null check
        "mixed": {"event_types": ["page_view", "purchase"], "dimensions": ["product_id"],
                  "measures": [{"name": "events", "kind": "count"},
                               {"name": "cheapest", "kind": "min", "column": "amount"}]},
    }.items():
        document = yaml.safe_load((views_dir() / "product_sales.yaml").read_text())
        document.update(name=name, **changes)
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(document))
    views = load_views(tmp_path)
    device = by_check(view_suite(views["device_sales"]))
    assert device["in_set:device"].value_set == ["desktop", "mobile", "tablet"]
    assert device["not_null:device"].severity.value == "critical"
    assert "unique:window_start,device" in device
    mixed = by_check(view_suite(views["mixed"]))
    assert "not_null:product_id" not in mixed
    assert mixed["unique:window_start,product_id"].ignore_row_if == "never"  # nulls are a key
    assert (mixed["range:cheapest"].min_value, mixed["range:cheapest"].max_value) == (0, 1_000_000)


def test_suites_serialize_to_json() -> None:
    for suite in [bronze_suite(), *(view_suite(v) for v in load_views().values())]:
        document = json.loads(json.dumps(suite.to_json_dict()))
        assert len(document["expectations"]) == len(suite.expectations)
        assert all(e["severity"] in ("critical", "warning") for e in document["expectations"])
        assert document["meta"]["derived_columns"] == derived_columns(suite)


def test_a_derived_column_is_named_as_one_so_reports_tell_it_from_the_table_s() -> None:
    import great_expectations as gx

    assert is_derived("_window") and is_derived("_orphan_share")
    assert not is_derived("window_start") and not is_derived("page")
    check = expect_on(gx.expectations.ExpectColumnValuesToBeNull, "window", "aligned",
                      WARNING, column="wrong_window")
    with pytest.raises(ValueError, match=r"derived columns \['wrong_window'\] must start "
                                         r"with '_'"):
        new_suite("view_x", [check], {"wrong_window": "CASE WHEN true THEN 'x' END"})
    assert derived_columns(new_suite("view_x", [check], {"_wrong_window": "NULL"})) == {
        "_wrong_window": "NULL"}
    for suite in [bronze_suite(), *(view_suite(v) for v in load_views().values())]:
        assert derived_columns(suite) and all(map(is_derived, derived_columns(suite)))


# --- the verdict, from GX results (no Spark) ------------------------------------------------


def validation(suite: Any, results: list[Any], evaluated: int | None = None) -> Any:
    from great_expectations.core import ExpectationSuiteValidationResult

    count = len(results) if evaluated is None else evaluated
    return ExpectationSuiteValidationResult(
        success=all(r.success for r in results), results=results, suite_name=suite.name,
        statistics={"evaluated_expectations": count, "successful_expectations": 0,
                    "unsuccessful_expectations": 0, "success_percent": None})


def result(expectation: Any, success: bool, exception: dict | None = None) -> Any:
    from great_expectations.core import ExpectationValidationResult

    return ExpectationValidationResult(
        success=success, expectation_config=expectation.configuration,
        exception_info=exception or {"raised_exception": False, "exception_message": None,
                                     "exception_traceback": None})


def test_only_critical_failures_block_and_warnings_are_recorded() -> None:
    suite = view_suite(load_views()["page_traffic"])
    checks = by_check(suite)
    results = [result(e, True) for e in suite.expectations]
    assert interpret(suite, validation(suite, results)) == ([], [], len(results))
    failed = [result(e, check_name(e) not in ("range:views", "not_null:run_id"))
              for e in suite.expectations]
    critical, warnings, _ = interpret(suite, validation(suite, failed))
    assert [o.check for o in critical] == ["range:views"]
    assert [o.check for o in warnings] == ["not_null:run_id"]
    assert critical[0].column == "views" and critical[0].rule == checks["range:views"].meta["rule"]


def test_validation_that_did_not_run_never_passes() -> None:
    suite = view_suite(load_views()["page_traffic"])
    expectations = suite.expectations
    # a warning-level expectation that raised is a critical failure: it was not checked
    raised = [result(e, check_name(e) != "not_null:run_id",
                     {"raised_exception": True, "exception_message": "no column run_id",
                      "exception_traceback": "..."} if check_name(e) == "not_null:run_id"
                     else None) for e in expectations]
    critical, warnings, _ = interpret(suite, validation(suite, raised))
    assert [(o.check, o.error) for o in critical] == [("not_null:run_id", "no column run_id")]
    assert warnings == []
    # per-metric exception info (GX's shape when a metric fails), even alongside success
    nested = {"MetricConfigurationID(...)": {"raised_exception": True,
                                             "exception_message": "column missing"}}
    assert raised_exception(nested) == "column missing"
    flaky = [result(e, True, nested if i == 0 else None) for i, e in enumerate(expectations)]
    assert interpret(suite, validation(suite, flaky))[0][0].error == "column missing"
    # an expectation without a result, or nothing evaluated at all
    partial = [result(e, True) for e in expectations[1:]]
    critical, _, _ = interpret(suite, validation(suite, partial))
    assert [(o.check, o.error) for o in critical] == [
        (check_name(expectations[0]), "no result: not evaluated")]
    critical, _, evaluated = interpret(suite, validation(suite, [], evaluated=0))
    assert evaluated == 0 and critical[-1].error == "no expectation was evaluated"
    assert len(critical) == len(expectations) + 1


def gate_result(success: bool) -> GateResult:
    failure = ExpectationOutcome("range:views", "expect_column_values_to_be_between", "views",
                                 "critical", "a count is non-negative", None, 1, [-3])
    warning = ExpectationOutcome("not_null:run_id", "expect_column_values_to_not_be_null",
                                 "run_id", "warning", "lineage", None, 2, [None])
    return GateResult("batch", "page_traffic", START, END, success,
                      [] if success else [failure], [warning], 17, 8, 1.25)


def test_a_failed_gate_raises_with_the_failing_expectations_and_samples() -> None:
    enforce(gate_result(True))
    with pytest.raises(GateFailed) as raised:
        enforce(gate_result(False))
    message = str(raised.value)
    assert message.startswith("gate batch page_traffic [2026-11-20 10:00, 2026-11-20 11:00): "
                              "FAILED, 1 critical failures, 17 expectations, 1 warnings, 8 rows")
    assert "critical range:views (expect_column_values_to_be_between): 1 unexpected, e.g. [-3]" \
        in message
    assert "warning not_null:run_id" in message
    assert raised.value.result.critical_failures[0].samples == [-3]
    assert gate_result(True).summary().startswith(
        "gate batch page_traffic [2026-11-20 10:00, 2026-11-20 11:00): passed, 17 expectations")


def test_results_are_recorded_in_a_delta_table_sql_can_read(settings: Settings) -> None:
    import duckdb
    from deltalake import DeltaTable

    path = record(gate_result(False), settings, run_id="r-1")
    record(gate_result(True), settings, run_id="r-2")
    assert path == settings.table_path("quality_results")
    first, second = read_results(settings)
    assert (first["success"], first["run_id"], second["success"]) == (False, "r-1", True)
    assert first["critical_failures"][0]["samples"] == [-3]
    assert first["start"] == "2026-11-20T10:00:00+00:00" and first["evaluated"] == 17
    results = DeltaTable(path).to_pyarrow_dataset()  # noqa: F841 (DuckDB reads it by name)
    rows = duckdb.sql("SELECT run_id, success, critical_failures, warnings, interval_start "
                      "FROM results ORDER BY recorded_at").fetchall()
    assert [row[:4] for row in rows] == [("r-1", False, 1, 1), ("r-2", True, 0, 1)]
    assert rows[0][4] == START



def test_a_step_s_results_are_recorded_in_one_commit(settings: Settings) -> None:
    from deltalake import DeltaTable

    record(gate_result(True), settings)
    before = DeltaTable(results_path(settings)).version()
    record_with_pages([gate_result(False), gate_result(True)], settings, run_id="r-3")
    assert DeltaTable(results_path(settings)).version() == before + 1
    assert [(r["success"], r.get("run_id")) for r in read_results(settings)] == [
        (True, None), (False, "r-3"), (True, "r-3")]

def test_the_entry_point_refuses_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location("validate", REPO / "spark_jobs" /
                                                  "validate.py")
    assert spec is not None and spec.loader is not None
    validate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(validate)
    window = ["--start", "2026-11-20T10:00:00Z", "--end", "2026-11-20T11:00:00Z"]
    for argv, problem in [
        (["--layer", "batch", "--views", "nope", *window], "unknown views ['nope']"),
        (["--layer", "batch", "--views", "funnel,page_traffic", "--table-path", "x", *window],
         "--table-path needs exactly one view"),
        (["--layer", "bronze", "--views", "funnel", *window], "are for --layer batch"),
        (["--layer", "bronze", "--start", "2026-11-20T10:00:00", "--end",
          "2026-11-20T11:00:00Z"], "give a time zone"),
        (["--layer", "bronze", "--start", "2026-11-20T11:00:00Z", "--end",
          "2026-11-20T11:00:00Z"], "empty interval"),
    ]:
        with pytest.raises(SystemExit) as exited:
            validate.main(argv, settings=Settings())
        assert exited.value.code == 2
        assert problem in capsys.readouterr().err


def test_a_hopping_window_is_one_grain_long_and_starts_on_a_slide() -> None:
    """The ``_window`` column, as the real-time gate computes it (DuckDB): right only for a
    window a grain long that starts a whole number of slides after the epoch."""
    import duckdb

    view = ViewDefinition.model_validate({
        "name": "rolling", "description": "page views, an hour every 15 minutes",
        "event_types": ["page_view"], "grain": "1 hour", "slide": "15 minutes",
        "lateness": "10 minutes", "dimensions": [], "measures": [{"name": "n", "kind": "count"}]})
    connection = duckdb.connect()
    for macro in DUCKDB_MACROS:
        connection.execute(macro)
    windows = [("10:15", "11:15"), ("10:45", "11:45"), ("10:10", "11:10"), ("10:15", "10:30")]
    rows = connection.sql(
        f"SELECT {wrong_window(view)} FROM (VALUES "
        + ", ".join(f"(TIMESTAMP '2026-11-20 {s}:00', TIMESTAMP '2026-11-20 {e}:00')"
                    for s, e in windows)
        + ") AS t(window_start, window_end)").fetchall()
    assert [row[0] is None for row in rows] == [True, True, False, False]


def test_the_orphan_rate_is_judged_per_window_and_its_warning_shows_the_bound() -> None:
    """A window whose every order joined to ``unknown`` warns beside a window without
    orphans, though the two together are under the bound: the verdict cannot depend on how
    many windows a run covers. The warning says the worst window's share and the bound's
    value, not a setting's name."""
    import pyarrow as pa

    from lambdalake.quality.gate import run_suite_locally

    view = load_views()["product_sales_by_category"]
    ten, eleven, noon = (datetime(2026, 11, 20, hour, tzinfo=UTC) for hour in (10, 11, 12))
    windows = {"window_start": [ten, eleven, eleven], "window_end": [eleven, noon, noon]}
    rows = pa.table({**windows, "category": ["unknown", "books", "toys"],
                     "currency": ["EUR", "EUR", "EUR"], "orders": [1, 30, 9],
                     "units": [1, 30, 9],
                     "revenue": pa.array([Decimal("1.00")] * 3, pa.decimal128(18, 2)),
                     "run_id": ["manual__1"] * 3, "bronze_version": [7] * 3,
                     "computed_at": [noon] * 3})
    result = run_suite_locally(rows, view_suite(view), layer="batch", subject=view.name,
                               start=ten, end=noon, parameters={
                                   **interval_parameters(ten, noon), ORPHAN_MAX_SHARE: 0.2})
    assert 1 / 41 < 0.2  # the run's share: under the bound
    assert result.success and [w.check for w in result.warnings] == ["orphan_rate"], \
        result.report()
    warning = result.warnings[0]
    assert (warning.observed, warning.bounds) == (1.0, "at most 0.2")
    assert "observed 1.0 (at most 0.2)" in warning.describe()
    assert found(result.to_json()["warnings"][0]) == "observed 1.0 (at most 0.2)"
