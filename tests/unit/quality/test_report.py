"""The quality results as ``lambdalake quality``, ``lambdalake report`` and ``make demo``
print them."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from lambdalake.cli.main import build_parser
from lambdalake.cli.quality import cmd_quality
from lambdalake.quality.history import record
from lambdalake.quality.report import per_layer, summary
from lambdalake.quality.verdict import ExpectationOutcome, GateResult
from lambdalake.settings import Settings

HOUR = datetime(2026, 11, 20, 10, tzinfo=UTC)


def outcome(check: str, severity: str) -> ExpectationOutcome:
    return ExpectationOutcome(check=check, expectation="expect_column_values_to_be_between",
                              column="amount", severity=severity, rule="amount >= 0",
                              observed=None, unexpected_count=2, samples=[-1, -5], error=None)


@pytest.fixture(autouse=True)
def two_results(settings: Settings) -> None:
    """Every test here reads the same two recorded results: a bronze gate that passed with a
    warning, then a batch gate that failed."""
    passed = GateResult("bronze", "bronze_events", HOUR, HOUR.replace(hour=11), True, [],
                        [outcome("not_empty", "warning")], 26, 0)
    failed = GateResult("batch", "product_sales", HOUR, HOUR.replace(hour=11), False,
                        [outcome("amount_not_negative", "critical")], [], 17, 40)
    record(passed, settings, run_id="run-1")
    record(failed, settings, run_id="run-1")


def test_newest_first_with_the_verdict_and_the_failing_checks(
    settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cmd_quality(settings, build_parser().parse_args(["quality"])) == 0
    header, newest, oldest = capsys.readouterr().out.splitlines()
    assert header.split()[:3] == ["recorded", "(UTC)", "layer"]
    assert "product_sales" in newest and newest.endswith("FAILED: amount_not_negative")
    assert "[2026-11-20T10:00, 2026-11-20T11:00)" in newest
    assert "bronze_events" in oldest and oldest.endswith("passed, 1 warning")


def test_filters_and_json(settings: Settings, capsys: pytest.CaptureFixture[str]) -> None:
    cmd_quality(settings, build_parser().parse_args(["quality", "--failed", "--format", "json"]))
    [failed] = json.loads(capsys.readouterr().out)
    assert failed["subject"] == "product_sales"
    assert failed["critical_failures"][0]["samples"] == [-1, -5]
    cmd_quality(settings, build_parser().parse_args(["quality", "--layer", "bronze"]))
    assert len(capsys.readouterr().out.splitlines()) == 2


def test_counts_per_layer(settings: Settings) -> None:
    from lambdalake.quality.history import read_results

    counts = per_layer(read_results(settings))
    assert dict(counts["bronze"]) == {"runs": 1, "failed": 0, "with warnings": 1}
    assert dict(counts["batch"]) == {"runs": 1, "failed": 1, "with warnings": 0}


def test_report_prints_the_summary_and_writes_the_html(
    settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    from lambdalake.cli.quality import cmd_report

    assert cmd_report(settings, build_parser().parse_args(["report"])) == 0
    out = capsys.readouterr().out
    assert "batch    1 gate runs, 1 failed, 0 with warnings" in out
    assert "bronze   1 gate runs, 0 failed, 1 with warnings" in out
    html_path = Path(out.strip().splitlines()[-1].split()[2])
    html = html_path.read_text()
    assert html_path == settings.state_dir / "quality" / "docs" / "index.html"
    assert "amount_not_negative" in html and "-5" in html


def test_the_query_api_serves_the_same_results_with_validated_filters(settings: Settings) -> None:
    from fastapi.testclient import TestClient

    from lambdalake.serving.api import create_app

    with TestClient(create_app(settings)) as client:
        everything = client.get("/quality/results").json()
        assert [r["subject"] for r in everything] == ["product_sales", "bronze_events"]
        [failed] = client.get("/quality/results", params={"failed": "true"}).json()
        assert failed["critical_failures"][0]["samples"] == [-1, -5]
        assert failed["run_id"] == "run-1"
        assert client.get("/quality/results", params={"subject": "bronze_events"}).json()[0][
            "layer"] == "bronze"
        assert client.get("/quality/results", params={"layer": "serving"}).json() == []
        assert len(client.get("/quality/results", params={"limit": 1}).json()) == 1
        for bad in ({"layer": "gold"}, {"limit": 0}, {"limit": 5000}, {"failed": "maybe"}):
            answer = client.get("/quality/results", params=bad)
            assert answer.status_code == 422, bad
            assert answer.json()["detail"][0]["loc"] == ["query", next(iter(bad))]
        assert "/quality/results" in client.get("/openapi.json").json()["paths"]


def test_the_cli_filters_by_subject_and_refuses_a_bad_limit(
    settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    cmd_quality(settings, build_parser().parse_args(
        ["quality", "--subject", "bronze_events", "--format", "json"]))
    assert [r["subject"] for r in json.loads(capsys.readouterr().out)] == ["bronze_events"]
    with pytest.raises(SystemExit):
        build_parser().parse_args(["quality", "--limit", "0"])
    assert "not a whole number of at least 1" in capsys.readouterr().err


def test_every_layer_a_gate_records_can_be_asked_for_the_reference_layer_too(
    settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    from fastapi.testclient import TestClient

    from lambdalake.serving.api import create_app

    history = GateResult("reference", "product", HOUR, HOUR.replace(hour=11), True, [], [], 9, 4)
    record(history, settings, run_id="run-2")
    cmd_quality(settings, build_parser().parse_args(["quality", "--layer", "reference"]))
    [_, shown] = capsys.readouterr().out.splitlines()
    assert "reference" in shown and "product" in shown
    with TestClient(create_app(settings)) as client:
        [answer] = client.get("/quality/results", params={"layer": "reference"}).json()
        assert answer["subject"] == "product"
    with pytest.raises(ValueError, match="gate layer 'gold' is none of bronze, reference"):
        GateResult("gold", "x", HOUR, HOUR, True, [], [], 0, 0)


def recorded(result: GateResult, at: str) -> dict[str, object]:
    """``result`` as the history returns it, recorded at ``at`` (UTC, ``HH:MM`` on the 20th)."""
    return {**result.to_json(), "recorded_at": f"2026-11-20T{at}:00+00:00", "run_id": at}


def test_the_summary_keeps_failures_and_warnings_apart_once_per_interval_with_sample_tables(
) -> None:
    """A failed batch hour, an older hour restated after it, and an explained drift that
    three serving runs recorded for the same interval: the summary's newest data interval
    is the failed hour (not the restated one, recorded later), the failure and the warning
    are apart, the warning is listed once with how often and when last, the samples are
    tables, and the drift says how many keys explain it."""
    negative = ExpectationOutcome(
        "amount_not_negative", "expect_column_values_to_be_between", "amount", "critical",
        "amount >= 0", unexpected_count=2,
        samples=[{"order_id": "o1", "amount": "-1.00"}, {"order_id": "o2", "amount": None}])
    drift = ExpectationOutcome(
        "drift:orders:explained", "reconcile_realtime_with_batch", "orders", "warning",
        "exact", unexpected_count=2, explained_by={"product": 3},
        samples=[{"window_start": "2026-11-20 10:00:00", "dimensions": '{"category":"books"}',
                  "batch_value": "237", "realtime_value": "153",
                  "changed_keys": "product: p1"}])
    ten, eleven, eight = HOUR, HOUR.replace(hour=11), HOUR.replace(hour=8)
    results = [
        recorded(GateResult("batch", "product_sales", ten, eleven, False, [negative], [], 17,
                            40), "12:00"),
        *(recorded(GateResult("serving", "product_sales_by_category", ten, eleven, True, [],
                              [drift], 5, 12), at) for at in ("12:10", "12:20", "12:40")),
        recorded(GateResult("batch", "product_sales", eight, eight.replace(hour=9), True, [],
                            [], 17, 38), "12:30"),
    ]
    assert summary(results, newest=3) == [
        "batch    2 gate runs, 1 failed, 0 with warnings",
        "serving  3 gate runs, 0 failed, 3 with warnings",
        "",
        "Newest data interval per layer and subject (its verdict as last recorded):",
        "  layer    subject                    newest data interval                  verdict",
        "  batch    product_sales              [2026-11-20T10:00, 2026-11-20T11:00)  "
        "FAILED: amount_not_negative",
        "  serving  product_sales_by_category  [2026-11-20T10:00, 2026-11-20T11:00)  "
        "passed, 1 warning",
        "",
        "Failures (critical), most recently recorded first (1 of 1):",
        "  batch product_sales [2026-11-20T10:00, 2026-11-20T11:00) amount_not_negative: "
        "2 unexpected (recorded 2026-11-20 12:00:00)",
        "      order_id  amount",
        "      o1        -1.00",
        "      o2        null",
        "",
        "Warnings, most recently recorded first (1 of 1):",
        "  serving product_sales_by_category [2026-11-20T10:00, 2026-11-20T11:00) "
        "drift:orders:explained: 2 unexpected, explained by 3 changed product keys "
        "(recorded 3 times, last 2026-11-20 12:40:00)",
        "      window_start         dimensions            batch_value  realtime_value  "
        "changed_keys",
        "      2026-11-20 10:00:00  {\"category\":\"books\"}  237          153             "
        "product: p1",
        "",
        "Most recently recorded:",
        "  recorded (UTC)       layer    subject                    interval"
        "                              rows  verdict",
        "  2026-11-20 12:40:00  serving  product_sales_by_category  "
        "[2026-11-20T10:00, 2026-11-20T11:00)  12    passed, 1 warning",
        "  2026-11-20 12:30:00  batch    product_sales              "
        "[2026-11-20T08:00, 2026-11-20T09:00)  38    passed",
        "  2026-11-20 12:20:00  serving  product_sales_by_category  "
        "[2026-11-20T10:00, 2026-11-20T11:00)  12    passed, 1 warning",
    ]


def test_a_summary_without_failures_or_warnings_says_so() -> None:
    passed = GateResult("bronze", "bronze_events", HOUR, HOUR.replace(hour=11), True, [], [],
                        26, 9)
    lines = summary([recorded(passed, "12:00")], newest=3)
    assert lines[lines.index("Failures (critical): none") + 2] == "Warnings: none"
