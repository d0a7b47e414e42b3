"""Quality gates on real slices: good data passes, bad data fails with the right expectation
and sample values, and a gate that could not validate fails rather than passes."""

from __future__ import annotations

import ipaddress
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from lambdalake.batch.written import gated_bronze_line
from lambdalake.contracts.registry import ContractRegistry
from lambdalake.generator.traffic import MALFORMED_KINDS, TrafficGenerator, TrafficProfile
from lambdalake.lake.bronze import (
    BRONZE_TABLE,
    count_bronze_arrivals,
    read_bronze_interval,
    read_bronze_rows,
    read_quarantine_arrivals,
    read_quarantine_rows,
    write_micro_batch,
)
from lambdalake.lake.delta_rs import table_version
from lambdalake.lake.ledger import BatchLedger
from lambdalake.lake.reference import HISTORY_TABLE
from lambdalake.orchestration.spark_jobs import DATA_REJECTED_EXIT
from lambdalake.quality.gate import validate_bronze_frame, validate_view_frame
from lambdalake.quality.history import read_results
from lambdalake.quality.slices import (
    read_view_rows,
    validate_bronze_slice,
    validate_quarantine_slice,
    validate_reference_history,
    validate_view_slice,
)
from lambdalake.quality.suites.bronze import bronze_suite
from lambdalake.quality.suites.entity import entity_suite
from lambdalake.quality.suites.view import view_suite
from lambdalake.quality.verdict import GateFailed, GateResult, enforce
from lambdalake.settings import Settings
from lambdalake.streaming.classification import classify
from lambdalake.views.catalog import current_table_path
from lambdalake.views.definition import UNKNOWN_MEMBER, ViewDefinition, load_views
from tests.support.batch_runs import stage_and_promote
from tests.support.browser import fenced_page
from tests.support.repo import REPO

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

SCREENSHOTS = REPO / "test-artifacts"
# fixed date: the tests build their Kafka rows with timestamps of their own (KAFKA_SCHEMA)
# and gate slices they name; no age or now comparison reaches them
START = datetime(2026, 11, 20, 10, tzinfo=UTC)
END = START + timedelta(hours=1)  # the validated hour; the next one is in bronze, not in views
PROFILE = TrafficProfile(count=1500, seed=7, start_time=START, event_time_rate=1500 / 7200,
                         late_fraction=0.1, max_lateness_minutes=20, duplicate_fraction=0.05,
                         malformed_fraction=0.02, users=50, pages=5, products=6)
KAFKA_SCHEMA = ("key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, "
                "timestamp TIMESTAMP, timestampType INT")


@pytest.fixture(scope="module", autouse=True)
def gate_session(spark: SparkSession) -> Iterator[None]:
    """The session configured as the entry point configures its own (restored afterwards:
    the session is shared with other tests)."""
    from lambdalake.quality.gate import GATE_SPARK_CONF

    before = {key: spark.conf.get(key, None) for key in GATE_SPARK_CONF}
    for key, value in GATE_SPARK_CONF.items():
        spark.conf.set(key, value)
    yield
    for key, value in before.items():
        if value is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, value)


@pytest.fixture(scope="module")
def lake(spark: SparkSession, settings: Settings, tmp_path_factory: pytest.TempPathFactory
         ) -> Settings:
    """Two hours of generated traffic in bronze; every view computed for the first hour."""
    root, state = tmp_path_factory.mktemp("quality-lake"), tmp_path_factory.mktemp("state")
    lake = settings.model_copy(update={
        "state_dir": state, "lake": settings.lake.model_copy(update={"root": str(root)})})
    arrival = (START + timedelta(hours=3)).replace(tzinfo=None)
    rows = [(r.key, r.value, "events", i % 3, i, arrival, 0)
            for i, r in enumerate(TrafficGenerator(PROFILE).records())]
    contracts = ContractRegistry()
    write_micro_batch(classify(spark.createDataFrame(rows, KAFKA_SCHEMA), contracts,
                               lake.ingest), lake, contracts, BatchLedger("quality-test"), 0)
    stage_and_promote(spark, lake, list(load_views().values()), START, END, "quality-1")
    return lake


def view_rows(spark: SparkSession, lake: Settings, view: ViewDefinition) -> DataFrame:
    from pyspark.sql import functions as F

    return (spark.read.format("delta").load(current_table_path(lake, view.name))
            .where((F.col("window_start") >= F.lit(START)) & (F.col("window_start") < F.lit(END))))


@pytest.fixture(params=["spark", "local"])
def engine(request: pytest.FixtureRequest) -> str:
    """Where a gate validates: on Spark, or in this process (Arrow rows, GX's pandas engine),
    as the ``validate_*_slice`` functions choose by the slice's size. Both must agree."""
    return str(request.param)


def on(engine: str, frame: DataFrame) -> Any:
    """``frame`` as ``engine``'s gate takes it."""
    return frame if engine == "spark" else frame.toArrow()


def gated_on(engine: str, lake: Settings) -> Settings:
    """``lake`` with bronze, quarantine, view and reference history slices validated on
    ``engine`` (on Spark: every slice with rows; an empty one is read in this process
    either way)."""
    most = 0 if engine == "spark" else 10**9
    return lake.model_copy(update={"quality": lake.quality.model_copy(
        update={"local_gate_max_rows": most})})


def failures(result: GateResult) -> dict[str, Any]:
    return {o.check: o for o in result.critical_failures}


_WATCH: list[list[str]] = []


def _audit(event: str, args: tuple) -> None:
    if not _WATCH or event not in ("socket.connect", "socket.getaddrinfo"):
        return
    target = args[1] if event == "socket.connect" else args[0]
    host = target[0] if isinstance(target, tuple) else target
    if not isinstance(host, str) or host.startswith("/") or host == "localhost":
        return  # a Unix socket, or the loopback name
    try:
        if ipaddress.ip_address(host).is_loopback:
            return
    except ValueError:
        pass
    _WATCH[-1].append(f"{event} {target}")


sys.addaudithook(_audit)


@contextmanager
def no_network() -> Iterator[list[str]]:
    """Records every connection (or name lookup) to anything but loopback meanwhile."""
    attempts: list[str] = []
    _WATCH.append(attempts)
    try:
        yield attempts
    finally:
        _WATCH.pop()


def test_good_slices_pass_without_touching_the_network(
    spark: SparkSession, lake: Settings, engine: str
) -> None:
    with no_network() as attempts:
        bronze = validate_bronze_slice(spark, gated_on(engine, lake), START, END)
        views = {name: validate_view_slice(spark, gated_on(engine, lake), view,
                                           current_table_path(lake, name), START, END)
                 for name, view in load_views().items()}
    assert attempts == []
    assert bronze.success, bronze.report()
    assert bronze.rows > 500 and bronze.evaluated == len(bronze_suite().expectations)
    # a passing gate keeps GX's observed values for its Data Docs page: the row count
    observed = {r.expectation_config.meta["check"]: r.result for r in bronze.validation.results}
    assert observed["not_empty"]["observed_value"] == bronze.rows
    assert observed["not_null:event_id"]["unexpected_count"] == 0
    assert (bronze.layer, bronze.subject, bronze.warnings) == ("bronze", "bronze_events", [])
    for name, result in views.items():
        assert result.success, result.report()
        # the lake has no reference data: every event of an enriched view is an orphan
        orphans = ["orphan_rate"] if load_views()[name].joins else []
        assert result.rows > 0 and [w.check for w in result.warnings] == orphans
        assert result.evaluated == len(view_suite(load_views()[name]).expectations)
        enforce(result)


def test_a_view_slice_is_read_without_spark_up_to_the_local_gate_s_size(
    spark: SparkSession, lake: Settings
) -> None:
    path = current_table_path(lake, "page_traffic")
    expected = view_rows(spark, lake, load_views()["page_traffic"]).count()
    local = read_view_rows(path, START, END, max_rows=expected)
    assert local is not None and local.num_rows == expected > 0
    assert read_view_rows(path, START, END, max_rows=expected - 1) is None  # Spark's then
    assert read_view_rows(path, END, END + timedelta(hours=1), max_rows=0).num_rows == 0


def test_a_bronze_slice_and_its_arrivals_are_read_without_spark_as_spark_reads_them(
    spark: SparkSession, lake: Settings
) -> None:
    from pyspark.sql import functions as F

    max_rows = lake.quality.local_gate_max_rows
    expected = read_bronze_interval(spark, lake, START, END)
    local = read_bronze_rows(lake, START, END, max_rows=max_rows)
    assert local is not None and local.num_rows == expected.count() > 500
    assert sorted(local.column("offset").to_pylist()) == sorted(
        row["offset"] for row in expected.select("offset").collect())
    assert "raw_value" not in local.column_names and "event_date" in local.column_names
    assert read_bronze_rows(lake, START, END, max_rows=local.num_rows - 1) is None  # Spark's
    assert read_bronze_rows(lake, START, END, max_rows, columns=["event_type"]).column_names \
        == ["event_type"]
    arrival = START + timedelta(hours=3)  # when the fixture's records reached Kafka
    bronze = spark.read.format("delta").load(lake.table_path("bronze_events"))
    for start, end in [(arrival, arrival + timedelta(hours=1)), (START, END),
                       (arrival - timedelta(minutes=30), arrival),  # the end is exclusive
                       (arrival - timedelta(minutes=30), arrival + timedelta(microseconds=1))]:
        arrived = bronze.where((F.col("kafka_timestamp") >= F.lit(start))
                               & (F.col("kafka_timestamp") < F.lit(end))).count()
        assert count_bronze_arrivals(lake, start, end) == arrived
    quarantined = read_quarantine_rows(lake, arrival, arrival + timedelta(hours=1), max_rows)
    assert quarantined is not None and quarantined.num_rows == read_quarantine_arrivals(
        spark, lake, arrival, arrival + timedelta(hours=1)).count() > 0
    assert count_bronze_arrivals(lake, arrival, arrival + timedelta(hours=1)) > 1000


def test_bad_view_rows_fail_with_the_right_expectation_and_samples(
    spark: SparkSession, lake: Settings, engine: str
) -> None:
    from pyspark.sql import functions as F

    view = load_views()["page_traffic"]
    rows = view_rows(spark, lake, view)
    page = rows.orderBy("page").first()["page"]
    bad = (rows.withColumn("views", F.when(F.col("page") == page, F.lit(-3))
                           .otherwise(F.col("views")))
           .withColumn("window_end", F.when(F.col("page") == page, F.col("window_end")
                                            + F.expr("INTERVAL 30 MINUTES"))
                       .otherwise(F.col("window_end")))
           .unionByName(rows.where(F.col("page") == page)))  # the same key twice
    result = validate_view_frame(on(engine, bad), view, START, END)
    assert not result.success
    failed = failures(result)
    assert set(failed) == {"range:views", "unique:window_start,page", "window"}, result.report()
    assert failed["window"].samples == ["2026-11-20 10:00:00 .. 2026-11-20 11:30:00"]
    assert failed["window"].column == "window_start,window_end"
    assert failed["range:views"].samples == [-3]
    assert failed["range:views"].unexpected_count == 1
    duplicates = failed["unique:window_start,page"]
    assert duplicates.unexpected_count == 2
    assert {d["page"] for d in duplicates.samples} == {page}
    with pytest.raises(GateFailed, match=r"range:views .*1 unexpected, e\.g\. \[-3\]") as raised:
        enforce(result)
    assert raised.value.result is result

    sales = load_views()["product_sales"]
    refund = view_rows(spark, lake, sales).withColumn("revenue", F.col("revenue") - 100_000)
    result = validate_view_frame(on(engine, refund), sales, START, END)
    assert set(failures(result)) == {"range:revenue"}, result.report()
    assert all(sample.startswith("-") for sample in failures(result)["range:revenue"].samples)


def test_the_data_docs_page_of_a_failed_gate_renders_styled_with_no_network(
    spark: SparkSession, lake: Settings
) -> None:
    """Debian's chromium opens the recorded page from disk; every request that is not a
    local file is refused and listed, so a single CDN load fails the test."""
    from pyspark.sql import functions as F

    from lambdalake.quality.docs import docs_dir, record_with_pages, vendor_assets

    vendor_assets(lake)
    view = load_views()["product_sales"]
    bad = view_rows(spark, lake, view).withColumn("revenue", F.col("revenue") - 100_000)
    record_with_pages([validate_view_frame(bad, view, START, END)], lake, run_id="docs-test")
    recorded = read_results(lake)[-1]
    page = docs_dir(lake) / recorded["docs"]
    local_files_only = fenced_page(lambda url: url.startswith("file://"),
                                   viewport={"width": 1400, "height": 900})
    with local_files_only as (tab, refused):
        failed: list[str] = []
        tab.on("requestfailed", lambda request: failed.append(request.url))
        tab.goto(page.as_uri(), wait_until="load")
        tab.evaluate("document.fonts.ready")
        styled = tab.evaluate("""() => ({
            bootstrap: getComputedStyle(document.body).fontFamily,
            jquery: typeof window.jQuery,
            table: typeof (window.jQuery && window.jQuery.fn.bootstrapTable),
            icons: document.fonts.check('900 16px "Font Awesome 6 Free"'),
            text: document.body.innerText,
            status: document.querySelector('#section-1').innerText,
            rowCount: [...document.querySelectorAll('tr')].filter(row =>
                row.innerText.includes('greater than or equal to 1 rows'))
                .map(row => row.querySelectorAll('td')[2].innerText)})""")
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        tab.screenshot(path=str(SCREENSHOTS / "data-docs-page.png"), full_page=True)
    assert refused == [] and failed == [], (refused, failed)
    assert "-apple-system" in styled["bootstrap"]  # Bootstrap's font stack: its CSS applied
    assert (styled["jquery"], styled["table"]) == ("function", "function")
    assert styled["icons"], "Font Awesome's web font did not load"
    assert "revenue" in styled["text"] and "view_product_sales" in styled["text"]
    # the verdict the Data quality page shows, and the row count GX observed
    assert recorded["success"] is False and recorded["critical_failures"]
    assert "Status: FAILED: range:revenue" in " ".join(styled["status"].split())
    assert [int(re.sub(r"\D", "", cell)) for cell in styled["rowCount"]] == [bad.count()]


def test_enriched_view_rows_hold_their_entity_s_members_and_few_orphans(
    spark: SparkSession, lake: Settings, engine: str
) -> None:
    from pyspark.sql import functions as F

    view = load_views()["product_sales_by_category"]
    orphans = view_rows(spark, lake, view)  # no reference data: every category is unknown
    assert {row.category for row in orphans.select("category").distinct().collect()} == {
        UNKNOWN_MEMBER}
    result = validate_view_frame(on(engine, orphans), view, START, END, orphan_max_share=0.2)
    assert result.success and [w.check for w in result.warnings] == ["orphan_rate"]
    assert result.warnings[0].observed == 1.0

    currencies = sorted(r.currency for r in orphans.select("currency").distinct().collect())
    some = orphans.withColumn("category", F.when(F.col("currency") != currencies[0],
                                                 F.lit("books")).otherwise(F.col("category")))
    orphaned = F.when(F.col("category") == UNKNOWN_MEMBER, F.col("orders")).otherwise(0)
    shares = [row.share for row in some.groupBy("window_start").agg(
        (F.sum(orphaned) / F.sum("orders")).alias("share")).collect()]
    share = max(shares)  # judged per window: the worst window's share
    assert 0 < share < 1
    below = validate_view_frame(on(engine, some), view, START, END, orphan_max_share=share)
    assert below.success and below.warnings == [], below.report()
    above = validate_view_frame(on(engine, some), view, START, END,
                                orphan_max_share=share * 0.99)
    assert [w.check for w in above.warnings] == ["orphan_rate"]

    wrong = some.withColumn("category", F.when(F.col("category") == "books", F.lit("weapons"))
                            .otherwise(F.lit(None)))
    assert set(failures(validate_view_frame(on(engine, wrong), view, START, END))) == {
        "in_set:category", "not_null:category"}


def test_an_entity_s_history_is_gated_for_overlaps_open_versions_and_its_contract(
    spark: SparkSession, lake: Settings, tmp_path: Path, engine: str
) -> None:
    reference = gated_on(engine, lake.model_copy(update={"lake": lake.lake.model_copy(
        update={"root": str(tmp_path)})}))
    assert validate_reference_history(spark, reference, "product", START, END).rows == 0
    # fixed date: history rows written and gated directly, never compared with now
    day = datetime(2026, 11, 19, tzinfo=UTC).replace(tzinfo=None)
    later, latest = day + timedelta(hours=5), day + timedelta(hours=9)

    def version(key: str, number: int, valid_from: datetime, valid_to: datetime | None,
                category: str = "books", price: str = "9.99") -> tuple[Any, ...]:
        return ("product", key, valid_from, valid_to, number, 1, key, f"Product {key}",
                category, "acme", Decimal(price), "2026-11-19T00:00:00.000Z")

    schema = ("entity STRING, entity_key STRING, valid_from TIMESTAMP, valid_to TIMESTAMP, "
              "version INT, schema_version BIGINT, product_id STRING, name STRING, "
              "category STRING, brand STRING, list_price DECIMAL(18,2), updated_at STRING")
    good = [version("a", 1, day, later), version("a", 2, later, None, "toys"),
            version("b", 1, day, latest), version("c", 1, later, None)]
    bad = [version("a", 1, day, latest), version("a", 2, later, None, "toys"),  # overlap
           version("b", 1, day, None), version("b", 2, later, None),            # two open
           version("c", 1, later, later, "weapons", "-1")]                      # empty, bad

    def gate(rows: list[tuple[Any, ...]]) -> GateResult:
        (spark.createDataFrame(rows, schema).write.format("delta").mode("overwrite")
         .partitionBy("entity").save(reference.table_path(HISTORY_TABLE)))
        return validate_reference_history(spark, reference, "product", START, END)

    passed = gate(good)
    assert passed.success and passed.rows == 4, passed.report()
    assert (passed.layer, passed.subject) == ("reference", "reference_history:product")
    assert passed.evaluated == len(entity_suite("product").expectations)
    failed = failures(gate(bad))
    assert set(failed) == {"validity", "one_current_row_per_key", "in_set:category",
                           "range:list_price"}, failed
    assert sorted(failed["validity"].samples) == [
        "a v1: overlaps the next version", "b v1: overlaps the next version",
        "c v1: an empty interval"]
    assert failed["one_current_row_per_key"].samples == ["b", "b"]


def test_an_empty_slice_fails_only_when_it_should_have_rows(
    spark: SparkSession, lake: Settings, engine: str
) -> None:
    view = load_views()["funnel"]
    path = current_table_path(lake, view.name)
    lake = gated_on(engine, lake)
    not_computed = validate_view_slice(spark, lake, view, path, END, END + timedelta(hours=1))
    assert not not_computed.success and not_computed.rows == 0
    assert failures(not_computed)["not_empty"].observed == 0
    dead_hour = START + timedelta(days=1)
    quiet = validate_view_slice(spark, lake, view, path, dead_hour, dead_hour + timedelta(hours=1))
    assert quiet.success and quiet.rows == 0, quiet.report()
    assert [w.check for w in quiet.warnings] == ["not_empty"]
    dead_bronze = validate_bronze_slice(spark, lake, dead_hour, dead_hour + timedelta(hours=1))
    assert dead_bronze.success and dead_bronze.rows == 0, dead_bronze.report()
    assert [w.check for w in dead_bronze.warnings] == ["not_empty"]
    required = validate_bronze_slice(spark, lake, dead_hour, dead_hour + timedelta(hours=1),
                                     require_rows=True)
    assert not required.success and list(failures(required)) == ["not_empty"]


def test_quarantine_is_gated_by_arrival_and_unusual_counts_are_warnings(
    spark: SparkSession, lake: Settings, engine: str
) -> None:
    lake = gated_on(engine, lake)
    arrival = START + timedelta(hours=3)  # when the fixture's records reached Kafka
    quarantine = validate_quarantine_slice(spark, lake, arrival, arrival + timedelta(hours=1))
    assert (quarantine.layer, quarantine.subject) == ("bronze", "quarantine_events")
    assert quarantine.success and quarantine.warnings == [], quarantine.report()
    malformed = sum(r.kind in MALFORMED_KINDS for r in TrafficGenerator(PROFILE).records())
    assert quarantine.rows == malformed  # ~2 % of 1,500 records, under the 5 % rate
    strict = lake.model_copy(update={
        "quality": lake.quality.model_copy(update={"quarantine_max_rate": 0.001})})
    too_many = validate_quarantine_slice(spark, strict, arrival, arrival + timedelta(hours=1))
    assert too_many.success and [w.check for w in too_many.warnings] == ["quarantine_rate"]
    assert too_many.warnings[0].observed == quarantine.rows
    before = validate_quarantine_slice(spark, lake, START, END)  # nothing arrived then
    assert before.success and before.rows == 0 and before.warnings == [], before.report()
    bronze = validate_bronze_slice(spark, lake, START, END)
    unusual = validate_bronze_slice(spark, lake, START, END, row_count=(1, bronze.rows // 4))
    assert unusual.success and [w.check for w in unusual.warnings] == ["row_count:usual"]
    assert unusual.warnings[0].observed == bronze.rows


def test_a_bronze_slice_with_foreign_or_broken_events_fails(
    spark: SparkSession, lake: Settings, engine: str
) -> None:
    from pyspark.sql import functions as F

    events = read_bronze_interval(spark, lake, START, END)
    one = events.orderBy("offset").limit(1)
    late = END + timedelta(minutes=5)
    bad = events.unionByName(
        one.withColumn("occurred_at", F.lit(late)).withColumn("offset", F.col("offset") + 10**6)
    ).unionByName(
        one.withColumn("event_id", F.lit(None).cast("string"))
        .withColumn("offset", F.col("offset") + 2 * 10**6)
    ).unionByName(one)  # the same Kafka record twice
    view = events.where("event_type = 'page_view'").orderBy("offset").limit(1)
    pageless = view.withColumn("page", F.lit(None).cast("string")).withColumn(
        "offset", F.col("offset") + 3 * 10**6)
    result = validate_bronze_frame(on(engine, bad.unionByName(pageless)), START, END)
    failed = failures(result)
    assert set(failed) == {"in_interval:occurred_at", "not_null:event_id",
                           "unique:topic,partition,offset", "not_null:page[page_view]"}, \
        result.report()
    assert failed["not_null:page[page_view]"].samples == [f"page_view {view.first()['event_id']}"]
    assert failed["not_null:page[page_view]"].column == "page"
    assert failed["in_interval:occurred_at"].samples == [late.replace(tzinfo=None).isoformat()]
    assert failed["not_null:event_id"].unexpected_count == 1
    assert failed["unique:topic,partition,offset"].unexpected_count == 2


def test_a_gate_that_cannot_validate_fails(
    spark: SparkSession, lake: Settings, monkeypatch: pytest.MonkeyPatch, engine: str
) -> None:
    from great_expectations.core import ExpectationSuiteValidationResult
    from great_expectations.datasource.fluent.interfaces import Batch

    view = load_views()["page_traffic"]
    missing = validate_view_frame(on(engine, view_rows(spark, lake, view).drop("unique_users")),
                                  view, START, END)
    assert not missing.success
    failed = failures(missing)
    assert failed["columns"].samples == ["unique_users"]
    assert failed["not_null:unique_users"].error and failed["range:unique_users"].error

    no_table = validate_view_slice(spark, gated_on(engine, lake), view,
                                   f"{lake.lake.root}/nothing", START, END)
    assert not no_table.success and no_table.evaluated == 0
    assert "validation did not run" in (no_table.critical_failures[0].error or "")

    def boom(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("GX blew up")

    monkeypatch.setattr(Batch, "validate", boom)
    raised = validate_view_frame(on(engine, view_rows(spark, lake, view)), view, START, END)
    assert not raised.success and raised.evaluated == 0
    assert "GX blew up" in (raised.critical_failures[0].error or "")

    def nothing(self: Batch, suite: Any, **kwargs: Any) -> ExpectationSuiteValidationResult:
        return ExpectationSuiteValidationResult(
            success=True, results=[], suite_name=suite.name,
            statistics={"evaluated_expectations": 0, "successful_expectations": 0,
                        "unsuccessful_expectations": 0, "success_percent": None})

    monkeypatch.setattr(Batch, "validate", nothing)
    vacuous = validate_view_frame(on(engine, view_rows(spark, lake, view)), view, START, END)
    assert not vacuous.success and vacuous.evaluated == 0
    assert "no expectation was evaluated" in [o.error for o in vacuous.critical_failures]


def load_entry_point() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("validate", REPO / "spark_jobs" /
                                                  "validate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


WINDOW = ["--start", "2026-11-20T10:00:00Z", "--end", "2026-11-20T11:00:00Z"]


@pytest.fixture(scope="module")
def broken_table(spark: SparkSession, lake: Settings) -> str:
    """A copy of page_traffic's first hour with every count negated."""
    from pyspark.sql import functions as F

    path = f"{lake.lake.root}/broken_page_traffic"
    (view_rows(spark, lake, load_views()["page_traffic"]).withColumn("views", -F.col("views"))
     .write.format("delta").partitionBy("window_start").save(path))
    return path


def test_the_entry_point_prints_records_and_exits_by_verdict(
    lake: Settings, broken_table: str, capsys: pytest.CaptureFixture[str]
) -> None:
    validate = load_entry_point()
    assert validate.main(["--layer", "bronze", *WINDOW, "--run-id", "r-1"], lake) == 0
    out = capsys.readouterr().out
    assert "gate bronze [2026-11-20 10:00, 2026-11-20 11:00): passed" in out
    bronze_now = table_version(lake.table_path(BRONZE_TABLE))  # what the run computes
    assert out.splitlines()[0] == gated_bronze_line(bronze_now)
    assert validate.main(["--layer", "batch", "--views", "page_traffic", "--table-path",
                          broken_table, *WINDOW, "--run-id", "r-2"], lake) == DATA_REJECTED_EXIT
    out = capsys.readouterr().out
    assert "gate batch page_traffic [2026-11-20 10:00, 2026-11-20 11:00): FAILED" in out
    assert "  critical range:views (expect_column_values_to_be_between): " in out
    # the next hour has events in bronze but no view rows: every requested view is validated
    next_hour = ["--start", "2026-11-20T11:00:00Z", "--end", "2026-11-20T12:00:00Z"]
    assert validate.main(["--layer", "batch", "--views", "page_traffic,funnel", *next_hour,
                          "--run-id", "r-3"], lake) == DATA_REJECTED_EXIT
    out = capsys.readouterr().out
    assert out.count("[2026-11-20 11:00, 2026-11-20 12:00): FAILED") == 2
    assert out.count("  critical not_empty (expect_table_row_count_to_be_between): observed 0") == 2
    # a gate that could not read its slice is no verdict on the data: 1, worth a retry
    assert validate.main(["--layer", "batch", "--views", "page_traffic", "--table-path",
                          f"{lake.lake.root}/no_such_table", *WINDOW, "--run-id", "r-4"],
                         lake) == 1
    assert "validation did not run" in capsys.readouterr().out
    recorded = [(r["layer"], r["subject"], r["success"], r["run_id"]) for r in read_results(lake)]
    assert recorded[-8:] == [("bronze", "bronze_events", True, "r-1"),
                             ("bronze", "quarantine_events", True, "r-1"),
                             # each joined entity's history (none yet: nothing to fail)
                             ("reference", "reference_history:product", True, "r-1"),
                             ("reference", "reference_history:user_profile", True, "r-1"),
                             ("batch", "page_traffic", False, "r-2"),
                             ("batch", "page_traffic", False, "r-3"),
                             ("batch", "funnel", False, "r-3"),
                             ("batch", "page_traffic", False, "r-4")]


def test_the_entry_point_gates_a_run_s_staged_slices_not_the_served_ones(
    spark: SparkSession, lake: Settings, broken_table: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--staged`` validates what the run (``--run-id``) staged, where no reader looks: a
    run whose staged slice breaks a bound is rejected while the served slice passes, and one
    whose staged slice is sound passes while the served one is left alone."""
    from deltalake import DeltaTable

    from lambdalake.batch.recompute import stage_views
    from lambdalake.batch.staging import staging_path

    validate = load_entry_point()
    served = current_table_path(lake, "page_traffic")
    served_version = DeltaTable(served).version()
    bad = staging_path(lake, "page_traffic", "staged-bad", START, END)
    spark.read.format("delta").load(broken_table).write.format("delta").save(bad)
    assert validate.main(["--layer", "batch", "--views", "page_traffic", *WINDOW, "--staged",
                          "--run-id", "staged-bad"], lake) == DATA_REJECTED_EXIT
    assert "  critical range:views (expect_column_values_to_be_between): " in \
        capsys.readouterr().out
    assert validate.main(["--layer", "batch", "--views", "page_traffic", *WINDOW,
                          "--run-id", "served"], lake) == 0
    stage_views(spark, lake, [load_views()["page_traffic"]], START, END, "staged-good")
    assert validate.main(["--layer", "batch", "--views", "page_traffic", *WINDOW, "--staged",
                          "--run-id", "staged-good"], lake) == 0
    assert DeltaTable(served).version() == served_version  # the gates wrote nothing there
    with pytest.raises(SystemExit) as usage:
        validate.main(["--layer", "batch", *WINDOW, "--staged"], lake)
    assert usage.value.code == 2 and "--staged needs --run-id" in capsys.readouterr().err


def test_the_entry_point_opens_a_spark_session_only_for_a_slice_too_large_for_it(
    lake: Settings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import lambdalake.spark

    opened: list[str] = []
    task_session = lambdalake.spark.task_session

    def counted(app_name: str, *args: Any) -> Any:
        opened.append(app_name)
        return task_session(app_name, *args)

    monkeypatch.setattr(lambdalake.spark, "task_session", counted)
    validate = load_entry_point()
    for layer in ("bronze", "batch"):
        assert validate.main(["--layer", layer, *WINDOW, "--run-id", "local"], lake) == 0
    assert opened == []
    assert validate.main(["--layer", "batch", "--views", "page_traffic", *WINDOW,
                          "--run-id", "spark"], gated_on("spark", lake)) == 0
    assert opened == ["validate-batch"]
    assert capsys.readouterr().out.count("gate batch page_traffic [") == 2


@pytest.mark.slow
def test_the_entry_point_runs_as_airflow_will_run_it(lake: Settings, broken_table: str) -> None:
    run = subprocess.run(
        [sys.executable, str(REPO / "spark_jobs" / "validate.py"), "--layer", "batch",
         "--views", "page_traffic", "--table-path", broken_table, *WINDOW, "--run-id", "child"],
        env={**os.environ, **lake.to_environment()}, capture_output=True, text=True,
        timeout=600, cwd=REPO,
    )
    assert run.returncode == DATA_REJECTED_EXIT, run.stdout[-3000:] + run.stderr[-3000:]
    assert "gate batch page_traffic [2026-11-20 10:00, 2026-11-20 11:00): FAILED" in run.stdout
    assert "critical range:views (expect_column_values_to_be_between)" in run.stdout
    last = read_results(lake)[-1]
    assert (last["subject"], last["success"], last["run_id"]) == ("page_traffic", False, "child")
    assert last["critical_failures"][0]["samples"]
