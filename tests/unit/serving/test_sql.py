"""The read-only SQL surface over small Delta tables written with delta-rs (no JVM): what it
answers equals the rows API's merged answer, what it refuses it says, its limits hold."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from datetime import date

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lambdalake.serving.api import create_app
from lambdalake.serving.query import parse_query, run_query
from lambdalake.serving.snapshot import SnapshotStore
from lambdalake.serving.sql import NoRowsYet, SqlBusy, SqlError, SqlRunner
from lambdalake.settings import Settings
from lambdalake.views.definition import ViewDefinition, load_views
from tests.support.serving_tables import append_realtime, publish_hours, write_batch
from tests.support.settings_factory import MakeSettings

VIEWS = load_views()


@pytest.fixture
def lake(make_settings: MakeSettings) -> Settings:
    """Batch: hour 0 (published) and hour 1 (not); real-time: hours 1 and 2. The merged
    answer is batch's hour 0 and real-time's hours 1 and 2."""
    lake = make_settings(batch={"start_date": date(2026, 11, 20)},
                         serving={"sql_timeout_seconds": 1.0})
    write_batch(lake, [(0, "/a", 10), (0, "/b", 5), (1, "/a", 99)])
    publish_hours(lake, 0)
    append_realtime(lake, 0, [(1, "/a", 3), (2, "/b", 4), (2, "/c", 1)])
    return lake


def runner(lake: Settings, views: dict[str, ViewDefinition] = VIEWS) -> SqlRunner:
    return SqlRunner(SnapshotStore(lake, views), views, lake.serving)


def test_a_window_answers_what_the_rows_api_answers(lake: Settings) -> None:
    sql = runner(lake)
    answer = sql.answer("SELECT * FROM page_traffic WHERE window_start >= '2026-11-20T01:00:00Z'"
                        " AND window_start < '2026-11-20T03:00:00Z' ORDER BY window_start, page")
    rows_api = run_query(sql.store.get("page_traffic"), parse_query(
        VIEWS, "page_traffic", start="2026-11-20T01:00:00Z", end="2026-11-20T03:00:00Z")).rows
    assert answer.rows == rows_api
    assert [(r["window_start"][11:13], r["page"], r["views"], r["source"])
            for r in answer.rows] == [("01", "/a", 3, "realtime"), ("02", "/b", 4, "realtime"),
                                      ("02", "/c", 1, "realtime")]
    assert [c["name"] for c in answer.columns][:4] == [
        "window_start", "window_end", "page", "views"]
    assert answer.views["page_traffic"]["high_water_mark"] == "2026-11-20T01:00:00Z"
    assert answer.truncated is False


def test_aggregates_run_over_the_merged_answer_never_both_layers(lake: Settings) -> None:
    answer = runner(lake).answer(
        "WITH per_page AS (SELECT page, sum(views) AS views, count(*) AS windows, "
        "min(source) AS first_source FROM page_traffic GROUP BY page) "
        "SELECT * FROM per_page ORDER BY views DESC")
    # /a: batch 10 at hour 0 + real-time 3 at hour 1 (batch's unpublished 99 is not served)
    assert answer.rows == [
        {"page": "/a", "views": 13, "windows": 2, "first_source": "batch"},
        {"page": "/b", "views": 9, "windows": 2, "first_source": "batch"},
        {"page": "/c", "views": 1, "windows": 1, "first_source": "realtime"},
    ]
    assert [c["type"] for c in answer.columns] == ["VARCHAR", "HUGEINT", "BIGINT", "VARCHAR"]


def test_rows_beyond_max_rows_are_cut_and_say_so(lake: Settings) -> None:
    sql = runner(lake)
    ordered = "SELECT page, views FROM page_traffic ORDER BY views DESC"
    assert sql.answer(ordered, max_rows=2).rows == [{"page": "/a", "views": 10},
                                                   {"page": "/b", "views": 5}]
    assert sql.answer(ordered, max_rows=2).truncated is True
    assert sql.answer(ordered, max_rows=5).truncated is False
    with pytest.raises(SqlError, match="max_rows must be 1 or more"):
        sql.answer(ordered, max_rows=0)


def test_values_answer_as_json_has_them(lake: Settings) -> None:
    answer = runner(lake).answer(
        "SELECT sum(views) * 100000000000000000000 AS huge, 1.50::DECIMAL(4, 2) AS price, "
        "'nan'::DOUBLE AS nan, 'inf'::DOUBLE AS inf, DATE '2026-11-20' AS day, "
        "max(window_start) AS newest, [1.5::DECIMAL(3, 1)] AS prices, "
        "{'at': min(window_start)} AS first FROM page_traffic")
    assert answer.rows == [{
        "huge": 2300000000000000000000, "price": "1.50", "nan": None, "inf": None,
        "day": "2026-11-20", "newest": "2026-11-20T02:00:00.000Z", "prices": ["1.5"],
        "first": {"at": "2026-11-20T00:00:00.000Z"}}]
    json.dumps(answer.rows, allow_nan=False)  # what the API's JSONResponse does


@pytest.mark.parametrize(("statement", "message"), [
    ("INSERT INTO page_traffic VALUES (1)", "only queries are answered .* not INSERT"),
    ("CREATE TABLE copy AS SELECT * FROM page_traffic", "not CREATE"),
    ("COPY page_traffic TO '/tmp/out.csv'", "not COPY"),
    ("ATTACH '/tmp/other.db'", "not ATTACH"),
    ("PRAGMA version", "not PRAGMA"),
    ("SET memory_limit = '10GB'", "not SET"),
    ("DESCRIBE page_traffic", "not DESCRIBE"),
    ("SELECT 1; SELECT 2", r"one statement, please \(found 2\)"),
    ("", r"found 0"),
    ("SELECT * FROM read_csv('/etc/passwd')", "table functions are not answered"),
    ("SELECT * FROM range(1000000000)", "table functions are not answered"),
    ("SELECT * FROM duckdb_settings()", "table functions are not answered"),
    ("SELECT (SELECT count(*) FROM read_parquet('x')) FROM page_traffic", "table functions"),
    ("SELECT * FROM '/etc/passwd'", "no view '/etc/passwd'"),
    ("SELECT * FROM information_schema.tables", "is not a view"),
    ("SELECT * FROM lake.main.page_traffic", "is not a view"),
    ("SELECT * FROM page_trafic", "no view 'page_trafic' .*page_traffic"),
    ("SELECT nope FROM page_traffic", 'Referenced column "nope" not found'),
    ("SELECT page, page FROM page_traffic", "columns named twice: page"),
    ("SELECT 'x'::BLOB AS raw", "column 'raw' is binary"),
    ("SELEC * FRM page_traffic", "not SQL this surface reads|only queries"),
    ("SELECT * FROM page_traffic WHERE page = '", "not SQL this surface reads"),
])
def test_anything_but_one_query_over_the_views_is_refused_saying_why(
    lake: Settings, statement: str, message: str
) -> None:
    with pytest.raises(SqlError, match=message):
        runner(lake).answer(statement)


def test_the_sandbox_reaches_no_file_even_past_the_checks(lake: Settings) -> None:
    """The checks refuse table functions; DuckDB itself is configured not to read files
    either (a replacement scan of a quoted path is the one route left to try)."""
    with pytest.raises(SqlError, match="no view") as refused:
        runner(lake).answer('SELECT * FROM "/etc/hostname"')
    assert "hostname" in str(refused.value)
    from lambdalake.serving.sql import sandbox
    with sandbox(64) as connection, pytest.raises(Exception, match="disabled by configuration"):
        connection.sql("SELECT * FROM read_csv('/etc/hostname')")


def test_a_query_running_past_the_timeout_is_interrupted(lake: Settings) -> None:
    started = time.monotonic()
    with pytest.raises(SqlError, match=r"ran longer than 1 s \(serving.sql_timeout_seconds\)"):
        runner(lake).answer("WITH RECURSIVE forever(n) AS (SELECT 1 UNION ALL "
                            "SELECT n + 1 FROM forever) SELECT count(*) FROM forever")
    assert time.monotonic() - started < 30  # interrupted, not run to its (absent) end


def test_a_query_needing_more_memory_than_allowed_is_refused(
    make_settings: MakeSettings
) -> None:
    lake = make_settings(batch={"start_date": date(2026, 11, 20)},
                         serving={"sql_memory_mb": 16, "sql_timeout_seconds": 60})
    append_realtime(lake, 0, [(0, "/a", 1)])
    with pytest.raises(SqlError, match=r"needs more than 16 MiB \(serving.sql_memory_mb\)"):
        runner(lake).answer(
            "WITH RECURSIVE big(n, text) AS (SELECT 1, repeat('x', 10000) UNION ALL "
            "SELECT n + 1, text || 'y' FROM big WHERE n < 100000) "
            "SELECT text FROM big ORDER BY text DESC LIMIT 1")


def test_a_query_waits_for_a_free_slot_then_is_turned_away(make_settings: MakeSettings) -> None:
    """One slot: the first endless query holds it for its second, the next takes it as it
    is freed, and a third that waited its second for either is turned away."""
    lake = make_settings(batch={"start_date": date(2026, 11, 20)},
                         serving={"sql_concurrency": 1, "sql_timeout_seconds": 1})
    append_realtime(lake, 0, [(0, "/a", 1)])
    sql = runner(lake)
    forever = ("WITH RECURSIVE forever(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM forever) "
               "SELECT count(*) FROM forever")
    sql.answer("SELECT 1 AS warm")  # the snapshot is taken before the slot is contended
    endless = [threading.Thread(target=pytest.raises, args=(SqlError, sql.answer, forever))
               for _ in range(2)]
    for thread in endless:
        thread.start()
        time.sleep(0.1)
    with pytest.raises(SqlBusy, match="1 SQL queries kept running for 1 s"):
        sql.answer("SELECT count(*) AS rows FROM page_traffic")
    for thread in endless:
        thread.join()
    assert sql.answer("SELECT count(*) AS rows FROM page_traffic").rows == [{"rows": 1}]


def test_a_view_with_no_table_yet_has_no_rows_to_query(make_settings: MakeSettings) -> None:
    lake = make_settings(batch={"start_date": date(2026, 11, 20)})
    with pytest.raises(NoRowsYet, match="view 'page_traffic' has no rows yet"):
        runner(lake).answer("SELECT count(*) FROM page_traffic")


@pytest.fixture
def client(lake: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(lake)) as client:
        yield client


def test_post_sql_answers_and_refuses_over_http(client: TestClient) -> None:
    answered = client.post("/sql", json={
        "sql": "SELECT page, sum(views) AS views FROM page_traffic GROUP BY page "
               "ORDER BY page", "max_rows": 2})
    assert answered.status_code == 200, answered.text
    body = answered.json()
    assert body["rows"] == [{"page": "/a", "views": 13}, {"page": "/b", "views": 9}]
    assert (body["truncated"], list(body["views"])) == (True, ["page_traffic"])
    refused = client.post("/sql", json={"sql": "DROP TABLE page_traffic"})
    assert (refused.status_code, refused.json()["detail"][:27]) == (
        400, "only queries are answered (")
    assert client.post("/sql", json={"sql": "SELECT 1", "max_rows": 0}).status_code == 422
    assert "/sql" in client.get("/openapi.json").json()["paths"]


def test_post_sql_needs_the_token_when_one_is_configured(make_settings: MakeSettings) -> None:
    lake = make_settings(batch={"start_date": date(2026, 11, 20)},
                         serving={"api_token": "s3cret-token"})
    append_realtime(lake, 0, [(0, "/a", 1)])
    with TestClient(create_app(lake)) as client:
        statement = {"sql": "SELECT count(*) AS n FROM page_traffic"}
        assert client.post("/sql", json=statement).status_code == 401
        assert client.post("/sql", json=statement, headers={
            "Authorization": "Bearer s3cret-token"}).json()["rows"] == [{"n": 1}]


def test_the_cli_answers_sql_as_a_table_or_json(
    lake: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    from lambdalake.cli.data import cmd_sql
    from lambdalake.cli.main import build_parser

    statement = "SELECT page, sum(views) AS views FROM page_traffic GROUP BY page ORDER BY page"
    assert cmd_sql(lake, build_parser().parse_args(["sql", statement])) == 0
    assert capsys.readouterr().out.splitlines() == [
        "page  views", "/a    13", "/b    9", "/c    1", "(3 rows)"]
    assert cmd_sql(lake, build_parser().parse_args(
        ["sql", statement, "--format", "json", "--max-rows", "1"])) == 0
    body = json.loads(capsys.readouterr().out)
    assert (body["rows"], body["truncated"]) == ([{"page": "/a", "views": 13}], True)
    assert cmd_sql(lake, build_parser().parse_args(["sql", "DELETE FROM page_traffic"])) == 2
    assert "lambdalake sql: only queries are answered" in capsys.readouterr().err


def statements_from_pieces() -> st.SearchStrategy[str]:
    """Statements made of SQL's pieces over the view's columns: mostly well-formed enough to
    reach DuckDB, so the answer's conversion and DuckDB's errors are fuzzed, not the parser's."""
    columns = st.sampled_from(["window_start", "window_end", "page", "views", "unique_users",
                               "source", "as_of", "complete", "late_rows", "*", "1", "NULL",
                               "'x'", "1.5", "'nan'::DOUBLE", "1e308 * 10", "-0.0"])
    calls = st.builds("{}({})".format, st.sampled_from(
        ["sum", "avg", "min", "max", "count", "list", "string_agg", "abs", "epoch",
         "date_trunc('hour', ", "typeof", "hash", "to_json", "struct_pack", "range"]), columns)
    items = st.lists(columns | calls | st.builds("{} / {}".format, columns, columns),
                     min_size=1, max_size=4).map(", ".join)
    tails = st.sampled_from(["", " GROUP BY ALL", " ORDER BY 1 DESC", " LIMIT 2", " WHERE views > 3",
                             " GROUP BY page HAVING count(*) > 0", ", page_traffic AS again",
                             " UNION ALL SELECT 1", " WHERE page IN (SELECT page FROM page_traffic)"])
    return st.builds("SELECT {} FROM page_traffic{}".format, items, tails)


@given(statement=statements_from_pieces())
@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck),
          database=None)
def test_whatever_the_statement_the_answer_is_json_or_a_refusal(
    sql_over_a_lake: SqlRunner, statement: str
) -> None:
    try:
        answer = sql_over_a_lake.answer(statement)
    except SqlError as refused:
        assert str(refused) and "Traceback" not in str(refused)
        return
    json.dumps(answer.rows, allow_nan=False)
    assert len(answer.rows) <= sql_over_a_lake.settings.sql_max_rows


@pytest.fixture(scope="module")
def sql_over_a_lake(tmp_path_factory: pytest.TempPathFactory) -> SqlRunner:
    lake = Settings(state_dir=tmp_path_factory.mktemp("sql-fuzz"),
                    batch={"start_date": date(2026, 11, 20)})  # type: ignore[arg-type]
    write_batch(lake, [(0, "/a", 10), (0, "/b", 5)])
    publish_hours(lake, 0)
    append_realtime(lake, 0, [(1, "/a", 3), (2, "/b", 4)])
    return runner(lake)
