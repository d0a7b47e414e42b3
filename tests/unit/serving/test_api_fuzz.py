"""The query API fuzzed from its own OpenAPI document (schemathesis): whatever a client
sends, no 5xx, no stack trace, and every status code and body is one the document names.
Times are declared ``date-time``, and generated with the edges where time code breaks."""

from __future__ import annotations

from collections import Counter

import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from lambdalake.serving.api import create_app
from lambdalake.views.definition import view_names
from tests.support.figures import Figures
from tests.support.serving_tables import append_realtime, publish_hours, write_batch
from tests.support.settings_factory import MakeSettings

VIEWS = view_names()


def app_over_small_views(make_settings: MakeSettings) -> object:
    lake = make_settings(batch={"start_date": "2026-11-20"})
    write_batch(lake, [(0, "/a", 10), (1, "/b", 11)])
    publish_hours(lake, 0)
    append_realtime(lake, 0, [(1, "/a", 3), (2, "/b", 4)])
    return create_app(lake)


def instants_at_the_edges() -> st.SearchStrategy[str]:
    """RFC 3339 instants, half of them on the first or last day the calendar has, at the
    epoch or on a leap day, half of those at a day's first or last microsecond, with any
    offset: ``0001-01-01T00:00:00+01:00`` lies in year 0 in UTC."""
    days = st.sampled_from(["0001-01-01", "9999-12-31", "1970-01-01", "2024-02-29"]) | \
        st.dates().map(str)
    clock = st.sampled_from(["00:00:00", "23:59:59.999999"]) | \
        st.times().map(lambda moment: moment.isoformat())
    offsets = st.just("Z") | st.builds("{}{:02d}:{:02d}".format, st.sampled_from("+-"),
                                       st.integers(0, 23), st.integers(0, 59))
    return st.builds("{}T{}{}".format, days, clock, offsets)


CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_schema_conformance]


def test_no_request_gets_a_server_error_or_an_undocumented_answer(
    make_settings: MakeSettings, figures: Figures,
) -> None:
    schemathesis.openapi.format("date-time", instants_at_the_edges())
    schema = schemathesis.openapi.from_asgi("/openapi.json", app_over_small_views(make_settings))
    operations = [result.ok() for result in schema.get_all_operations()]
    assert {op.path for op in operations} >= {"/views/{view}/rows", "/freshness"}
    assert schema.raw_schema["paths"]["/views/{view}/rows"]["get"]["parameters"][1][
        "schema"]["anyOf"][0] == {"type": "string", "format": "date-time"}
    statuses: Counter[int] = Counter()
    for operation in operations:

        # the document cannot list view names (views are data), so the fuzzer would only
        # ever meet 404s: most cases name a real view, and every other parameter is fuzzed
        @given(case=operation.as_strategy(), view=st.sampled_from([*VIEWS, "no_such_view"]))
        @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck),
                  database=None)
        def answers_properly(case: schemathesis.Case, view: str) -> None:
            if "view" in (case.path_parameters or {}):
                case.path_parameters = {**case.path_parameters, "view": view}
            response = case.call()
            statuses[response.status_code] += 1
            assert "Traceback" not in response.text
            case.validate_response(response, checks=CHECKS)

        answers_properly()
    server_errors = sum(n for status, n in statuses.items() if status >= 500)
    figures(operations=len(operations), requests=statuses.total(), server_errors=server_errors,
            statuses=dict(sorted(statuses.items())))
