"""What the late-rows and restatement tests share: a lake whose schedule starts on the day of
``tests.support.late_rows``, and the two views its bronze commits feed."""

from __future__ import annotations

import pytest

from lambdalake.settings import Settings
from lambdalake.views.definition import ViewDefinition, load_views
from tests.support.serving_tables import MIDNIGHT
from tests.support.settings_factory import MakeSettings


@pytest.fixture
def lake(make_settings: MakeSettings) -> Settings:
    return make_settings(batch={"start_date": MIDNIGHT.date()})


@pytest.fixture
def views() -> list[ViewDefinition]:
    all_views = load_views()
    return [all_views["page_traffic"], all_views["product_sales"]]
