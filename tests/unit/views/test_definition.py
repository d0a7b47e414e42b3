from pathlib import Path

import pytest
import yaml

from lambdalake.timeutil import duration_seconds
from lambdalake.views.definition import ViewError, load_views, views_dir


def test_the_default_views_load_and_check_against_the_contracts() -> None:
    views = load_views()
    assert set(views) == {"page_traffic", "product_sales", "funnel", "page_traffic_by_segment",
                          "page_traffic_rolling", "product_sales_by_category", "order_value"}
    assert views["page_traffic"].grain_seconds == 3600
    assert views["page_traffic"].lateness_seconds == 600
    assert views["product_sales"].key == ["window_start", "product_id", "currency"]
    kinds = {m.kind for v in views.values() for m in v.measures}
    assert {"distinct_count", "sum", "count"} <= kinds


@pytest.mark.parametrize(
    ("text", "seconds"), [("1 hour", 3600), ("10 minutes", 600), ("1 day", 86400), ("30 seconds", 30)]
)
def test_durations(text: str, seconds: int) -> None:
    assert duration_seconds(text) == seconds


def write_view(directory: Path, **changes: object) -> None:
    view = yaml.safe_load((views_dir() / "product_sales.yaml").read_text())
    view.update(changes)
    directory.mkdir(exist_ok=True)
    (directory / f"{view['name']}.yaml").write_text(yaml.safe_dump(view))


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"dimensions": ["shoe_size"]}, "column 'shoe_size' is in none of"),
        ({"event_types": ["refund"]}, "unknown event types"),
        ({"measures": [{"name": "x", "kind": "sum", "column": "currency"}]},
         "sum of STRING column 'currency'"),
        ({"measures": [{"name": "x", "kind": "sum"}]}, "sum needs a column"),
        ({"grain": "hourly"}, "is not a duration"),
        ({"measures": [{"name": "n", "kind": "count", "event_types": ["page_view"]}]},
         "which the view does not read"),
        ({"joins": [{"entity": "warehouse", "key": "product_id", "attributes": ["city"]}]},
         "unknown entity 'warehouse'"),
        ({"joins": [{"entity": "product", "key": "sku", "attributes": ["category"]}]},
         "key column 'sku' is in none of"),
        ({"joins": [{"entity": "product", "key": "product_id", "attributes": ["colour"]}]},
         "no attribute 'colour'"),
        ({"joins": [{"entity": "product", "key": "product_id", "attributes": ["list_price"]}]},
         "only STRING attributes join"),
        ({"joins": [{"entity": "product", "key": "product_id", "attributes": ["product_id"]}]},
         "would hide the event column"),
        ({"dimensions": ["segment"]}, "column 'segment' is in none of"),
        ({"slide": "25 minutes"}, "slide '25 minutes' does not divide grain '1 hour'"),
        ({"slide": "2 hours"}, "slide '2 hours' does not divide grain '1 hour'"),
        ({"slide": "0 minutes"}, "slide '0 minutes' does not divide"),
        ({"slide": "every 15"}, "is not a duration"),
        ({"slid": "15 minutes"}, r"\nslid\s+Extra inputs are not permitted"),
        ({"measures": [{"name": "p", "kind": "approx_percentile", "column": "amount",
                        "percentil": 0.5}]}, r"measures\.0\.percentil\s+Extra inputs are not permitted"),
    ],
)
def test_bad_definitions_name_the_view_and_the_problem(
    tmp_path: Path, changes: dict, problem: str
) -> None:
    write_view(tmp_path, **changes)
    with pytest.raises(ViewError, match=problem):
        load_views(tmp_path)


@pytest.mark.parametrize(("exact", "allowed"), [(0, 0), (1, 1), (7, 1), (12, 1), (13, 2),
                                                (1000, 80), (1001, 81)])
def test_a_distinct_count_estimate_may_be_off_by_4_rsd_rounded_up(exact: int, allowed: int) -> None:
    assert load_views()["funnel"].distinct_tolerance(exact, 4) == allowed


@pytest.mark.parametrize(("rsd", "lg_k"), [(0.02, 12), (0.0163, 12), (0.016, 13), (0.05, 9),
                                           (0.3, 4), (0.001, 21)])
def test_the_sketch_is_the_smallest_whose_standard_error_is_within_the_stated_rsd(
    rsd: float, lg_k: int
) -> None:
    view = load_views()["funnel"].model_copy(update={"approx_distinct_rsd": rsd})
    assert view.sketch_lg_k == lg_k
    assert 1.04 / 2 ** (lg_k / 2) <= rsd  # merged DataSketches HLL: RSE = 1.04 / sqrt(2^k)
    assert lg_k == 4 or 1.04 / 2 ** ((lg_k - 1) / 2) > rsd


def test_adding_a_view_is_adding_a_file(tmp_path: Path) -> None:
    write_view(tmp_path, name="device_sales", dimensions=["device"])
    assert "device_sales" in load_views(tmp_path)


def test_a_view_groups_by_the_attributes_it_joins(tmp_path: Path) -> None:
    write_view(tmp_path, name="sales_by_segment", dimensions=["segment", "currency"],
               joins=[{"entity": "user_profile", "key": "user_id", "attributes": ["segment"]}])
    view = load_views(tmp_path)["sales_by_segment"]
    assert view.joined_columns == ["segment"]
    assert "segment" not in view.event_columns and {"user_id", "currency"} <= set(
        view.event_columns)


def test_hopping_windows_start_every_slide_and_each_event_counts_in_grain_over_slide(
    tmp_path: Path,
) -> None:
    write_view(tmp_path, slide="15 minutes")
    [view] = load_views(tmp_path).values()
    tumbling = load_views()["product_sales"]
    assert (tumbling.slide_seconds, tumbling.windows_per_event, tumbling.reach_seconds) == (
        3600, 1, 0)
    assert (view.slide_seconds, view.windows_per_event, view.reach_seconds) == (900, 4, 2700)
    minute = 60_000_000
    at = 1_763_640_000_000_000 + 20 * minute  # 2025-11-20 12:20 UTC
    assert view.window_starts(at) == [at - 5 * minute - k * 15 * minute for k in range(4)]
    assert view.window_starts(at - 5 * minute) == view.window_starts(at)  # a slide's start
    assert tumbling.window_starts(at) == [at - 20 * minute]
