"""The lists of docs/reference/view-language.md that come from code, so that they cannot drift.

The page is written by hand; its regions between ``<!-- generated: NAME -->`` and
``<!-- /generated: NAME -->`` are this module's (``python -m docsgen.reference`` rewrites
them; ``tests/repo/test_view_language_doc.py`` fails when they differ):

* ``keys``, ``measure-keys``, ``join-keys``: every field of ``ViewDefinition``,
  ``Measure`` and ``Join`` with its type, default, constraints, meaning and an example;
* ``durations``: the units a duration (``grain``, ``lateness``, ``slide``) takes;
* ``kinds`` and ``all-kinds``: every kind of ``MEASURE_KINDS`` with a one-line example, and
  one view measuring each of them (a YAML example the page's test loads);
* ``expressions``: every construct the expression parser types (each handler of
  ``expression_parser._HANDLERS``), with an example typed against the ride-hailing contract;
* ``refused``, ``base-view`` and ``mistakes``: the messages the parser and the definition
  loader give for common mistakes (made in ``BASE_VIEW``), produced by running them.

A field, kind or construct without an entry here fails the generation, naming it.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic.fields import FieldInfo

from docsgen import REPO

PAGE = REPO / "docs" / "reference" / "view-language.md"
EXAMPLES = REPO / "docs" / "examples" / "ride-hailing"
"""The contracts the page's examples are checked against (``events/``, ``entities/``)."""
REGION = re.compile(r"(<!-- generated: (?P<name>[a-z-]+) -->\n)(?P<body>.*?)(<!-- /generated: "
                    r"(?P=name) -->)", re.DOTALL)

BASE_VIEW = """\
name: rides
description: Rides per city and hour.
event_types: [ride_completed]
grain: 1 hour
lateness: 10 minutes
dimensions: [city]
measures:
  - {name: rides, kind: count}
"""
"""The view each key's example and each mistake is applied to (a valid ride-hailing view)."""

KEY_EXAMPLES: dict[str, tuple[str, str]] = {
    "name": ("the view's name: its file is `schemas/views/<name>.yaml`, its tables and API "
             "path are named after it", "name: average_fare"),
    "description": ("what the view answers, in a sentence (`GET /views` shows it)",
                    "description: The mean fare per city and hour."),
    "event_types": ("the event types the view reads (contracts in `schemas/events/`)",
                    "event_types: [ride_completed]"),
    "grain": ("a window's length (a [duration](#durations)); windows are aligned to the epoch "
              "in UTC", "grain: 1 hour"),
    "slide": ("hopping windows: a window of `grain` starts every `slide`, which divides "
              "`grain`; each event counts in `grain / slide` windows", "slide: 15 minutes"),
    "lateness": ("how far behind the newest event time the speed layer has seen an event "
                 "may be and still count there (a [duration](#durations)); the batch layer "
                 "counts every event",
                 "lateness: 10 minutes"),
    "event_time": ("the event-time column windows are cut by", "event_time: occurred_at"),
    "dimensions": ("the grouping columns: event columns, joined attributes or derived "
                   "columns; a row's key is `window_start` and these",
                   "dimensions: [city, pickup_zone]"),
    "measures": ("the aggregates, each a [measure](#measure-keys) of a [kind](#measure-kinds)",
                 "measures: [{name: rides, kind: count}]"),
    "joins": ("[as-of joins](#as-of-joins) to reference data: attributes of an entity by the "
              "event's key", "joins: [{entity: driver, key: driver_id, attributes: [fleet]}]"),
    "filter": ("a [condition](#expressions): the view reads only the events it is TRUE for "
               "(NULL drops the event, as SQL's `WHERE`)", "filter: distance_km >= 1"),
    "columns": ("derived columns, `name: expression`, in order: each may read the events' "
                "columns, joined attributes and the derived columns above it",
                "columns: {fare_per_km: fare / distance_km}"),
    "approx_distinct_rsd": ("speed layer: the relative standard error `distinct_count` "
                            "estimates keep within", "approx_distinct_rsd: 0.01"),
    "quantile_sketch_k": ("speed layer: the KLL sketch's k for `approx_percentile` (rank error "
                          "1.33 % at 200)", "quantile_sketch_k: 400"),
    "top_k_lg_map_size": ("speed layer: log2 of the frequent-items sketch's counters for "
                          "`top_k` (exact up to 768 distinct values a key at 10)",
                          "top_k_lg_map_size: 12"),
}
"""Per key of a view: its meaning and a YAML line setting it."""

MEASURE_KEY_EXAMPLES: dict[str, tuple[str, str]] = {
    "name": ("the measure's column in the view's rows and answers; unique, and none of the "
             "key's", "{name: rides, kind: count}"),
    "kind": ("one of the [measure kinds](#measure-kinds)",
             "{name: average_fare, kind: avg, column: fare}"),
    "column": ("the column measured: an event column, a joined attribute or a derived column "
               "(every kind but `count`)", "{name: revenue, kind: sum, column: fare}"),
    "event_types": ("only events of these types (of those the view reads) count",
                    "{name: rides, kind: count, event_types: [ride_completed]}"),
    "percentile": ("`approx_percentile` only: which, 0 < p < 1",
                   "{name: p90_fare, kind: approx_percentile, column: fare, percentile: 0.9}"),
    "k": ("`first_k`, `last_k` and `top_k` only: how many values, 1 to 100",
          "{name: top_zones, kind: top_k, column: pickup_zone, k: 5}"),
    "filter": ("a [condition](#expressions): only the events it is TRUE for count",
               "{name: card_revenue, kind: sum, column: fare, filter: \"payment_method = "
               "'card'\"}"),
}
"""Per key of a measure: its meaning and a whole measure (one YAML flow mapping) using it."""

JOIN_EXAMPLE = "{entity: driver, key: driver_id, attributes: [fleet, vehicle_class]}"
JOIN_MEANINGS: dict[str, str] = {
    "entity": "the entity whose versions are joined (contracts in `schemas/entities/`)",
    "key": "the event column holding the entity's key (of the key's type)",
    "attributes": "the entity's STRING attributes the view's events gain as columns",
}

KIND_EXAMPLES: dict[str, tuple[str, str]] = {
    "count": ("the events", "{name: rides, kind: count}"),
    "sum": ("the sum (NULL where no event has a value)",
            "{name: revenue, kind: sum, column: fare}"),
    "min": ("the smallest value", "{name: cheapest_fare, kind: min, column: fare}"),
    "max": ("the largest value", "{name: dearest_fare, kind: max, column: fare}"),
    "distinct_count": ("how many different values",
                       "{name: riders, kind: distinct_count, column: rider_id}"),
    "approx_percentile": ("the p-quantile (`percentile_disc`)",
                          "{name: median_fare, kind: approx_percentile, column: fare, "
                          "percentile: 0.5}"),
    "avg": ("the mean", "{name: average_fare, kind: avg, column: fare}"),
    "variance": ("the sample variance (n - 1)",
                 "{name: fare_variance, kind: variance, column: fare}"),
    "stddev": ("the sample standard deviation", "{name: fare_spread, kind: stddev, column: fare}"),
    "first": ("the value of the oldest event that has one",
              "{name: first_zone, kind: first, column: pickup_zone}"),
    "last": ("the value of the newest event that has one",
             "{name: last_fare, kind: last, column: fare}"),
    "first_k": ("the values of the k oldest events that have one, oldest first",
                "{name: first_zones, kind: first_k, column: pickup_zone, k: 3}"),
    "last_k": ("the values of the k newest events that have one, newest first",
               "{name: latest_zones, kind: last_k, column: pickup_zone, k: 3}"),
    "top_k": ("the k most frequent values with their counts, most first",
              "{name: top_zones, kind: top_k, column: pickup_zone, k: 5}"),
}
"""Per measure kind: what a value is, and a measure of it over the ride-hailing contract."""

CONSTRUCTS: list[tuple[str, tuple[str, ...], list[str], str]] = [
    ("a column", ("column",), ["fare"],
     "an event column, a joined attribute or a derived column above; never qualified"),
    ("number literals", ("literal",), ["42", "19.99", "1e3"],
     "whole: BIGINT; with a point: an exact DECIMAL; with an exponent: DOUBLE"),
    ("string literal", ("literal",), ["'card'"], "single quotes"),
    ("`TRUE`, `FALSE`", ("boolean_literal",), ["TRUE"], ""),
    ("`NULL`", ("null",), ["CASE WHEN distance_km > 0 THEN fare ELSE NULL END"],
     "takes the type of its context; an expression of only NULL is refused"),
    ("`TIMESTAMP '...'`", ("timestamp_literal",),
     ["occurred_at >= TIMESTAMP '2026-12-01 00:00:00'"],
     "an instant, UTC unless it has an offset; the only cast the language has"),
    ("`+ - *`", ("arithmetic",), ["fare * 2", "fare + distance_km"],
     "BIGINT stays BIGINT; DECIMAL is exact, with Spark's precision and scale, refused where "
     "a result would be rounded to fit 38 digits; with a DOUBLE, DOUBLE"),
    ("`/`", ("arithmetic",), ["fare / distance_km"],
     "always DOUBLE; NULL for a zero divisor"),
    ("unary `-`", ("negation",), ["-fare"], ""),
    ("`= <> < <= > >=`", ("comparison",), ["fare >= 10", "city <> 'madrid'"],
     "numbers widened to a common type; strings, booleans or instants with their own type"),
    ("`x BETWEEN a AND b`", ("between",), ["distance_km BETWEEN 1 AND 5"], "both ends included"),
    ("`AND`, `OR`", ("logical",), ["payment_method = 'card' AND fare > 20"],
     "three-valued: `NULL AND FALSE` is FALSE, `NULL OR TRUE` is TRUE"),
    ("`NOT`", ("negated",), ["NOT city = 'berlin'", "city NOT IN ('madrid')"], ""),
    ("`x IS [NOT] NULL`", ("is_null",), ["distance_km IS NOT NULL"], "only with NULL"),
    ("`x IN (literal, ...)`", ("is_in",), ["city IN ('berlin', 'lisbon')"],
     "non-NULL literals only; NULL when `x` is NULL"),
    ("`CASE WHEN c THEN v ... [ELSE v] END`", ("case",),
     ["CASE WHEN fare < 10 THEN 'short' WHEN fare < 30 THEN 'medium' ELSE 'long' END"],
     "the branches meet in a common type; no ELSE: NULL; not `CASE x WHEN ...`"),
    ("`COALESCE(a, b, ...)`", ("coalesce",), ["COALESCE(distance_km, 0)"],
     "the arguments meet in a common type"),
    ("`LOWER(s)`, `UPPER(s)`", ("case_mapping",), ["UPPER(city)"],
     "ASCII letters only (`Ä` stays `Ä`): the JVM and Arrow map other letters differently"),
    ("`SUBSTRING(s, start[, length])`", ("substring",), ["SUBSTRING(pickup_zone, 1, 3)"],
     "literal bounds, in characters, from 1"),
    ("`ROUND(x[, digits])`", ("rounded",), ["ROUND(fare * 1.19, 2)"],
     "of a DECIMAL or BIGINT, half away from zero; of a DOUBLE refused: round a DECIMAL"),
    ("`ABS(x)`", ("absolute",), ["ABS(fare - 20)"], ""),
    ("`FLOOR(x)`, `CEIL(x)`", ("floor_or_ceil",), ["FLOOR(distance_km)", "CEIL(fare)"],
     "of a DECIMAL a DECIMAL of scale 0, of a DOUBLE a BIGINT; no digits"),
    ("`DATE_TRUNC(unit, t)`", ("truncated",), ["DATE_TRUNC('hour', occurred_at)"],
     "in UTC; weeks start on Monday; units: {units}"),
]
"""Every construct of the language: its form, the parser's handlers that type it (each of
``_HANDLERS`` named once at least), examples over the ride-hailing contract, and notes."""

REFUSED: list[str] = [
    "citi = 'berlin'",
    "r.fare > 10",
    "city + 1",
    "SUM(fare) > 100",
    "ROW_NUMBER() OVER (ORDER BY fare)",
    "RAND() < 0.5",
    "NOW()",
    "ROUND(fare / distance_km, 2)",
    "CAST(fare AS DOUBLE)",
    "city LIKE 'ber%'",
    "CASE city WHEN 'berlin' THEN 1 END",
    "DATE_TRUNC('hour', fare)",
]
"""Expressions outside the language; the page shows the parser's message for each."""

MISTAKES: list[tuple[str, str, str | None]] = [
    ("A kind that does not exist", "measures: [{name: mean_fare, kind: average, column: fare}]",
     None),
    ("A kind without its column", "measures: [{name: average_fare, kind: avg}]", None),
    ("A parameter the kind does not take",
     "measures: [{name: average_fare, kind: avg, column: fare, k: 3}]", None),
    ("`top_k` without `k`", "measures: [{name: top_zones, kind: top_k, column: pickup_zone}]",
     None),
    ("A sum of a text column", "measures: [{name: revenue, kind: sum, column: city}]", None),
    ("A `top_k` of a number", "measures: [{name: top_fares, kind: top_k, column: fare, k: 3}]",
     None),
    ("A misspelt column", "dimensions: [citi]", None),
    ("A duration the platform does not read", "grain: 1h", None),
    ("A filter that is not a condition", "filter: fare", None),
    ("Text compared with a number", "filter: city = 1", None),
    ("An aggregate in a filter", "filter: SUM(fare) > 100", None),
    ("A measure named like a dimension",
     "measures: [{name: city, kind: distinct_count, column: city}]", None),
    ("A derived column that hides an event column", "columns: {fare: \"ROUND(fare, 0)\"}",
     None),
    ("An expression with a comma, unquoted in a flow mapping",
     "columns: {whole_fare: ROUND(fare, 0)}", None),
    ("An event type without a contract", "event_types: [ride_started]", None),
    ("A join to an entity without a contract",
     "joins: [{entity: vehicle, key: driver_id, attributes: [fleet]}]", None),
    ("A file not named after its view", "name: rides_per_city", "rides"),
    ("A slide that does not divide the grain", "slide: 25 minutes", None),
    ("A misspelt key", "slid: 15 minutes", None),
]
"""Common mistakes: what is wrong, the YAML that does it (applied to ``BASE_VIEW``), and the
file's name when it is not the view's; the page shows what the loader says."""


def _field_type(field: FieldInfo) -> str:
    """The field's type as Python writes it, without module paths and ``| None`` (an
    optional key's default says none)."""
    text = str(field.annotation).replace("typing.", "").replace("<class '", "")
    text = re.sub(r"'>", "", text).removesuffix(" | None")
    return re.sub(r"\b[a-z_]+(\.[a-z_]+)+\.([A-Z])", r"\2", text)


def _flow(value: Any) -> str:
    """``value`` as one line of YAML."""
    return str(yaml.safe_dump(value, default_flow_style=True)).strip().removesuffix("...").strip()


def _default(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True)
    return "none" if value is None else f"`{_flow(value)}`"


def _constraints(field: FieldInfo) -> str:
    """The field's constraints in words (``MinLen``, ``Ge``, a pattern, ...)."""
    words = []
    for item in field.metadata:
        for attribute, form in (("min_length", "at least {} item"), ("ge", ">= {}"),
                                ("gt", "> {}"), ("le", "<= {}"), ("lt", "< {}"),
                                ("pattern", "matches `{}`")):
            value = getattr(item, attribute, None)
            if value is not None:
                words.append(form.format(value))
    return "; ".join(words)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def fields_table(fields: Mapping[str, FieldInfo], meanings: Mapping[str, str],
                 examples: Mapping[str, str], what: str) -> str:
    """A table of ``fields``: key, type, default, meaning (with constraints), example."""
    undocumented = sorted(set(fields) - set(meanings))
    if undocumented:
        raise ValueError(f"docsgen.view_language: no meaning for the {what} keys {undocumented}")
    lines = ["| key | type | default | meaning | example |", "| --- | --- | --- | --- | --- |"]
    for name, field in fields.items():
        constraints = _constraints(field)
        meaning = meanings[name] + (f" ({constraints})" if constraints else "")
        lines.append(f"| `{name}` | `{_field_type(field)}` | {_default(field)} | "
                     f"{_cell(meaning)} | `{_cell(examples[name])}` |")
    return "\n".join(lines) + "\n"


def keys_table() -> str:
    """Every key of a view definition."""
    from lambdalake.views.definition import ViewDefinition

    fields = ViewDefinition.model_fields
    return fields_table(fields, {k: m for k, (m, _) in KEY_EXAMPLES.items()},
                        {k: e for k, (_, e) in KEY_EXAMPLES.items()}, "view")


def measure_keys_table() -> str:
    """Every key of a measure."""
    from lambdalake.views.definition import Measure

    return fields_table(Measure.model_fields, {k: m for k, (m, _) in MEASURE_KEY_EXAMPLES.items()},
                        {k: e for k, (_, e) in MEASURE_KEY_EXAMPLES.items()}, "measure")


def join_keys_table() -> str:
    """Every key of a join (each example is a key of ``JOIN_EXAMPLE``)."""
    from lambdalake.views.definition import Join

    join = yaml.safe_load(JOIN_EXAMPLE)
    examples = {key: f"{key}: {_flow(value)}" for key, value in join.items()}
    return fields_table(Join.model_fields, JOIN_MEANINGS, examples, "join")


def durations_line() -> str:
    """The units of a duration, from ``lambdalake.timeutil``."""
    from lambdalake.timeutil import _UNIT_SECONDS

    units = ", ".join(f"`{unit}`" for unit in _UNIT_SECONDS)
    return (f"A duration is a whole number and a unit, {units}, singular or plural, with or "
            "without a space: `1 hour`, `15 minutes`, `90 seconds`, `2days`.\n")


def kinds_table() -> str:
    """Every measure kind: what it takes, how the speed layer holds it, an example."""
    from lambdalake.views.measures import MAX_K, MEASURE_KINDS

    missing = sorted(set(MEASURE_KINDS) ^ set(KIND_EXAMPLES))
    if missing:
        raise ValueError(f"docsgen.view_language: KIND_EXAMPLES and MEASURE_KINDS differ on "
                         f"{missing}")
    parameters = {"percentile": "`percentile` (0 < p < 1)", "k": f"`k` (1 to {MAX_K})"}
    from lambdalake.views.definition import ViewDefinition

    defaults = ViewDefinition.model_validate(yaml.safe_load(BASE_VIEW))
    lines = ["| kind | a value is | column | parameters | speed layer (stated error at the "
             "defaults) | example |",
             "| --- | --- | --- | --- | --- | --- |"]
    for name, kind in MEASURE_KINDS.items():
        column = ("none" if not kind.needs_column else "numeric" if kind.numeric_column
                  else "STRING" if kind.text_column else "any type")
        taken = ", ".join(parameters[p] for p in kind.takes) or "none"
        speed = ("exact" if kind.exact_in_speed_layer else ", ".join(
            f"`{key}` {value:.3g}" for key, value in kind.stated_error(defaults).items()))
        meaning, example = KIND_EXAMPLES[name]
        lines.append(f"| [`{name}`](measure-kinds.md) | {meaning} | {column} | {taken} | "
                     f"{speed} | `{_cell(example)}` |")
    return "\n".join(lines) + "\n"


def all_kinds_view() -> str:
    """One view measuring every kind, as the page's YAML example."""
    measures = "\n".join(f"  - {example}" for _, example in KIND_EXAMPLES.values())
    return ("```yaml\n# checked against docs/examples/ride-hailing\n"
            "name: every_kind\ndescription: One measure of each kind, per city and hour.\n"
            "event_types: [ride_completed]\ngrain: 1 hour\nlateness: 10 minutes\n"
            f"dimensions: [city]\nmeasures:\n{measures}\n```\n")


def ride_columns() -> dict[str, Any]:
    """The columns a ride-hailing view's expressions read, typed as the loader types them."""
    from lambdalake.contracts.registry import ContractRegistry
    from lambdalake.views.expressions import TIMESTAMP, SqlType

    contract = ContractRegistry(EXAMPLES / "events").latest("ride_completed")
    types = {name: SqlType.of(rule.spark_type) for name, rule in contract.fields.items()}
    return {**types, "occurred_at": TIMESTAMP}


def expressions_table() -> str:
    """Every construct, each example typed against the ride-hailing contract."""
    from lambdalake.views.expression_parser import _HANDLERS, _TRUNC_UNITS
    from lambdalake.views.expressions import typed

    handlers: set[Callable[..., Any]] = set(_HANDLERS.values())
    named = {name for _, names, _, _ in CONSTRUCTS for name in names}
    missing = sorted(h.__name__ for h in handlers if h.__name__ not in named)
    unknown = sorted(named - {h.__name__ for h in handlers})
    if missing or unknown:
        raise ValueError(f"docsgen.view_language: CONSTRUCTS misses the parser's handlers "
                         f"{missing}, or names handlers it has not: {unknown}")
    columns = ride_columns()
    lines = ["| construct | example | its type | notes |", "| --- | --- | --- | --- |"]
    units = ", ".join(f"`{unit.lower()}`" for unit in _TRUNC_UNITS)
    for construct, _, examples, notes in CONSTRUCTS:
        shown = "<br>".join(f"`{_cell(e)}`" for e in examples)
        types = "<br>".join(typed(e, columns).type.ddl for e in examples)
        lines.append(f"| {construct} | {shown} | {types} | {_cell(notes.format(units=units))} |")
    return "\n".join(lines) + "\n"


def refused_table() -> str:
    """What the parser says of each expression of ``REFUSED``."""
    from lambdalake.views.expressions import ExpressionError, typed

    columns = ride_columns()
    lines = ["| expression | the error |", "| --- | --- |"]
    for text in REFUSED:
        try:
            typed(text, columns)
        except ExpressionError as error:
            lines.append(f"| `{_cell(text)}` | {_cell(str(error))} |")
        else:
            raise ValueError(f"docsgen.view_language: {text!r} is not refused")
    return "\n".join(lines) + "\n"


def _pydantic_trimmed(message: str) -> str:
    """A loader's message without pydantic's input echo and link (what a reader needs)."""
    lines = [re.sub(r"\s*\[type=[a-z_]+, input_value=.*, input_type=\w+\]$", "", line)
             for line in message.splitlines()
             if not line.strip().startswith("For further information visit")]
    return "\n".join(lines)


def loader_error(view_yaml: str, file_stem: str | None = None) -> str | None:
    """What ``load_views`` says of ``view_yaml`` saved as ``schemas/views/<file_stem>.yaml``
    (default: the view's name), checked against the ride-hailing contracts; None if valid."""
    from lambdalake.contracts.registry import ContractRegistry, EntityRegistry
    from lambdalake.views.definition import ViewError, load_views

    stem = file_stem or yaml.safe_load(view_yaml)["name"]
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / f"{stem}.yaml"
        path.write_text(view_yaml)
        try:
            load_views(Path(directory), ContractRegistry(EXAMPLES / "events"),
                       EntityRegistry(EXAMPLES / "entities"))
        except ViewError as error:
            return _pydantic_trimmed(str(error).replace(str(Path(directory)), "schemas/views"))
    return None


def with_change(change: str, base: str = BASE_VIEW) -> str:
    """``base`` with the keys of the YAML ``change`` replaced (or added)."""
    view = {**yaml.safe_load(base), **yaml.safe_load(change)}
    return str(yaml.safe_dump(view, sort_keys=False))


def mistakes_list() -> str:
    """Each common mistake, the YAML that makes it, and the loader's error."""
    out = []
    for what, change, stem in MISTAKES:
        message = loader_error(with_change(change), stem)
        if message is None:
            raise ValueError(f"docsgen.view_language: {change!r} loads without an error")
        where = f" in `schemas/views/{stem}.yaml`" if stem else ""
        out += [f"**{what}**: `{change}`{where}", "", "```text", message, "```", ""]
    return "\n".join(out)


REGIONS: dict[str, Callable[[], str]] = {
    "keys": keys_table, "measure-keys": measure_keys_table, "join-keys": join_keys_table,
    "durations": durations_line, "kinds": kinds_table, "all-kinds": all_kinds_view,
    "expressions": expressions_table, "refused": refused_table, "mistakes": mistakes_list,
    "base-view": lambda: f"```text\n{BASE_VIEW}```\n",
}


def view_language_markdown(text: str | None = None) -> str:
    """The page (``text``, default the committed one) with every generated region current;
    each of ``REGIONS`` must be on it, once."""
    text = PAGE.read_text() if text is None else text
    found = [match["name"] for match in REGION.finditer(text)]
    if sorted(found) != sorted(REGIONS):
        raise ValueError(f"{PAGE.name}: generated regions {sorted(found)}, expected "
                         f"{sorted(REGIONS)}")
    return REGION.sub(lambda m: m[1] + REGIONS[m["name"]]() + m[4], text)
