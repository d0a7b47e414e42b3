"""The serving refresh diagnostic, on a few hours of publications."""

from __future__ import annotations

import re
import sys

import pytest

from bench.diagnostics import serving_refresh
from lambdalake.views.definition import load_views


def test_it_prints_both_refreshes_once_the_mark_followed_every_publish(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "argv", ["serving_refresh", "--hours", "3"])
    serving_refresh.main()  # asserts the mark reached the last of the 3 + 5 hours
    views = len(load_views())
    assert re.fullmatch(
        rf"3 hourly publications of {views} views \({3 * views} rows\): a refresh that finds "
        r"nothing new \d+\.\d\d ms of CPU, a refresh after a publish \d+\.\d ms "
        r"\(medians of 20 and 5\)\n", capsys.readouterr().out)
