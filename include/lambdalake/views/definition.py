"""View definitions: a view is declared once, in ``schemas/views/<name>.yaml``.

A definition names the events it reads, its window (``grain``: an event-time window's
length; with ``slide`` shorter than it, windows hop: one starts every ``slide`` and each
event counts in ``grain / slide`` of them, as Spark's ``window`` with a slide), its
lateness allowance, its dimensions and its measures. The batch layer and the speed layer
both derive their aggregation from it and from nothing else (in Spark,
``lambdalake.views.aggregate``; on Arrow, per micro-batch, ``lambdalake.speed.partials``);
no view's aggregation is written by hand, and tests hold the two readings to the same
answers. Definitions are checked against the event contracts when they
load: every column must exist in the events the view reads, every measure's kind is one of
``lambdalake.views.measures.MEASURE_KINDS``, and sums, extremes and percentiles need
numeric columns and ``top_k`` a STRING column.

A view may join reference data (``joins``): an entity, the event column holding its key,
and the entity's attributes the view uses as dimensions. The attributes become columns of
the view's events: as of each event's time in the batch layer, as of processing time in the
speed layer (``lambdalake.views.enrichment``). An event whose key has no version then
gets ``UNKNOWN_MEMBER``. Joins are checked against the entity contracts.

>>> views = load_views()                       # doctest: +SKIP
>>> views["page_traffic"].grain_seconds        # doctest: +SKIP
3600
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from lambdalake.settings import get_settings
from lambdalake.timeutil import duration_seconds
from lambdalake.views.expressions import (
    STRING,
    TIMESTAMP,
    Expression,
    ExpressionError,
    SqlType,
    typed,
)
from lambdalake.views.measures import (
    MEASURE_KINDS,
    MeasureKind,
    quantile_rank_error,
    top_k_error,
)

if TYPE_CHECKING:
    from lambdalake.contracts.registry import ContractRegistry, EntityRegistry, FieldRule


def views_dir() -> Path:
    """The project's view definitions, ``schemas/views`` (``LAMBDALAKE_PROJECT_DIR``)."""
    return get_settings().project_path("schemas", "views")


class ViewError(ValueError):
    """A view definition is invalid; the message names the view and the problem."""


class Measure(BaseModel):
    """One aggregate of a view; its ``kind`` is looked up in ``MEASURE_KINDS``."""

    model_config = ConfigDict(extra="forbid")  # a misspelt key is an error, not a default

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    kind: str
    column: str | None = None
    event_types: list[str] | None = Field(
        None, description="count only these event types (default: all the view reads)"
    )
    percentile: float | None = Field(None, description="approx_percentile: which, in (0, 1)")
    k: int | None = Field(None, description="first_k, last_k and top_k: how many values")
    filter: str | None = Field(
        None, description="aggregate only the events this SQL condition holds for "
        "(``lambdalake.views.expressions``)")

    @model_validator(mode="after")
    def _fits_its_kind(self) -> Measure:
        if self.kind not in MEASURE_KINDS:
            raise ValueError(f"measure {self.name!r}: kind {self.kind!r} is none of "
                             f"{sorted(MEASURE_KINDS)}")
        if self.measure_kind.needs_column and self.column is None:
            raise ValueError(f"measure {self.name!r}: {self.kind} needs a column")
        problems = self.measure_kind.problems(self)
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @property
    def measure_kind(self) -> MeasureKind:
        return MEASURE_KINDS[self.kind]

    @property
    def exact_in_speed_layer(self) -> bool:
        """Distinct counts and percentiles are sketches in the speed layer."""
        return self.measure_kind.exact_in_speed_layer


UNKNOWN_MEMBER = "unknown"
"""The attribute value of an event whose key has no entity version at the join's time."""


class Join(BaseModel):
    """Reference data a view joins: ``attributes`` of ``entity``, by the event's ``key``."""

    model_config = ConfigDict(extra="forbid")

    entity: str
    key: str = Field(description="the event column that holds the entity's key")
    attributes: list[str] = Field(min_length=1)


class ViewDefinition(BaseModel):
    """One view: what it reads, how it groups, what it measures."""

    model_config = ConfigDict(extra="forbid")  # `slid: 15 minutes` would be tumbling silently

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    description: str
    event_types: list[str] = Field(min_length=1)
    grain: str
    slide: str | None = Field(
        None, description="hopping windows: a window of `grain` starts every `slide` (it "
        "divides the grain); default: the grain (tumbling windows)")
    lateness: str
    event_time: str = "occurred_at"
    dimensions: list[str]
    measures: list[Measure] = Field(min_length=1)
    joins: list[Join] = Field(default_factory=list)
    filter: str | None = Field(
        None, description="read only the events this SQL condition holds for")
    columns: dict[str, str] = Field(
        default_factory=dict, description="derived columns: name -> SQL expression over the "
        "events' columns, joined attributes and earlier derived columns; usable as "
        "dimensions, measure columns and in filters")
    approx_distinct_rsd: float = Field(
        0.02, ge=0.001, lt=0.4,
        description="speed layer: bound on the relative standard error of distinct counts",
    )
    quantile_sketch_k: int = Field(
        200, ge=8, le=65535,
        description="speed layer: the KLL sketch's k for percentiles (rank error 1.33 % at 200)",
    )
    top_k_lg_map_size: int = Field(
        10, ge=3, le=16,
        description="speed layer: log2 of the frequent-items sketch's counters for top_k "
        "(count error 0.34 % of a key's values at 10; exact up to 768 distinct values)",
    )

    _typed: ViewExpressions | None = PrivateAttr(None)

    @field_validator("columns")
    @classmethod
    def _derived_names(cls, columns: dict[str, str]) -> dict[str, str]:
        for name in columns:
            if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
                raise ValueError(f"derived column {name!r}: lower case, digits and _")
        return columns

    @field_validator("grain", "slide", "lateness")
    @classmethod
    def _is_duration(cls, value: str | None) -> str | None:
        if value is not None:
            duration_seconds(value)
        return value

    @model_validator(mode="after")
    def _slide_divides_grain(self) -> ViewDefinition:
        if self.slide_seconds <= 0 or self.grain_seconds % self.slide_seconds:
            raise ValueError(f"view {self.name!r}: slide {self.slide!r} does not divide grain "
                             f"{self.grain!r} (windows start every slide, each a grain long)")
        return self

    @property
    def grain_seconds(self) -> int:
        """A window's length."""
        return duration_seconds(self.grain)

    @property
    def slide_seconds(self) -> int:
        """How far apart windows start: what interval bounds and window starts align to."""
        return duration_seconds(self.slide) if self.slide else self.grain_seconds

    @property
    def windows_per_event(self) -> int:
        """How many windows each event counts in (1: tumbling)."""
        return self.grain_seconds // self.slide_seconds

    @property
    def reach_seconds(self) -> int:
        """How far past its last window's start a slice reads events: windows starting
        before an interval's end close ``grain - slide`` after it (0: tumbling)."""
        return self.grain_seconds - self.slide_seconds

    def window_starts(self, moment_us: int) -> list[int]:
        """The starts (epoch microseconds) of the windows an event at ``moment_us`` counts
        in, newest first (on Arrow: ``lambdalake.speed.partials.in_windows``)."""
        slide_us = self.slide_seconds * 1_000_000
        newest = moment_us - moment_us % slide_us
        return [newest - hop * slide_us for hop in range(self.windows_per_event)]

    @property
    def lateness_seconds(self) -> int:
        return duration_seconds(self.lateness)

    @property
    def joined_columns(self) -> list[str]:
        """The columns the view's joins add to its events."""
        return [attribute for join in self.joins for attribute in join.attributes]

    @property
    def event_columns(self) -> list[str]:
        """The event columns the view reads (join keys included; joined attributes and
        derived columns not, but the columns their expressions read)."""
        computed = {*self.joined_columns, *self.columns}
        read = [self.event_time, *(j.key for j in self.joins), *self.dimensions,
                *(m.column for m in self.measures if m.column)]
        if self.expressions_text:
            read += sorted({c for e in self.expressions.all() for c in e.columns})
        return list(dict.fromkeys(c for c in read if c not in computed))

    @property
    def picks_by_order(self) -> bool:
        """Whether a measure picks events by their order (``first``, ``last``, ...), so the
        view reads each event's Kafka coordinates too (``views.measures.ORDER``)."""
        return any(m.measure_kind.ordered for m in self.measures)

    @property
    def expressions_text(self) -> list[str]:
        """Every SQL expression of the definition (filters and derived columns)."""
        return [*([self.filter] if self.filter else []), *self.columns.values(),
                *(m.filter for m in self.measures if m.filter)]

    @property
    def expressions(self) -> ViewExpressions:
        """The definition's expressions, typed against the contracts (checked first with
        the default contracts if ``check_against`` was not called)."""
        if self._typed is None:
            self.check_against(_default_contracts())
        assert self._typed is not None
        return self._typed

    @property
    def key(self) -> list[str]:
        """What identifies a row: the window and the dimensions."""
        return ["window_start", *self.dimensions]

    @property
    def sketch_lg_k(self) -> int:
        """log2 of the HLL sketch's buckets (DataSketches' ``lg_k``): the fewest
        whose relative standard error, 1.04 / sqrt(buckets) for merged sketches, is within
        ``approx_distinct_rsd`` (0.02: 2^12 buckets, 1.6 %)."""
        return max(4, math.ceil(2 * math.log2(1.04 / self.approx_distinct_rsd)))

    @property
    def quantile_rank_error(self) -> float:
        """How far the rank of a percentile the speed layer answers may be from the
        percentile (DataSketches' normalized rank error of a KLL sketch of
        ``quantile_sketch_k``, 99 % confidence)."""
        return quantile_rank_error(self.quantile_sketch_k)

    @property
    def top_k_error(self) -> float:
        """How far a count the speed layer answers for a ``top_k`` may be from the exact
        count, as a fraction of the key's values (DataSketches' a-priori error of a
        frequent-items sketch of 2^``top_k_lg_map_size`` counters)."""
        return top_k_error(self.top_k_lg_map_size)

    def distinct_tolerance(self, exact: float, rsds: float) -> int:
        """How far the speed layer's estimate of a distinct count whose exact value is
        ``exact`` may be from it: ``rsds`` relative standard deviations, rounded up to a
        whole count. An estimate is a whole number, and a small count's error is a whole
        hash collision, not a fraction of the count."""
        return math.ceil(rsds * self.approx_distinct_rsd * abs(exact))

    def check_against(self, contracts: ContractRegistry,
                      entities: EntityRegistry | None = None) -> None:
        """Raise ``ViewError`` unless every type and column exists in the contracts."""
        problems = []
        unknown = set(self.event_types) - set(contracts.event_types)
        if unknown:
            problems.append(f"unknown event types {sorted(unknown)}")
        readable = [contracts.latest(t) for t in self.event_types if t not in unknown]
        fields = {name: rule for c in readable for name, rule in c.fields.items()}
        if self.joins:
            problems += self._join_problems(fields, entities)
            fields = {**fields, **self._joined_fields(entities)}
        types = {name: SqlType.of(rule.spark_type) for name, rule in fields.items()}
        if self.event_time in types:
            types[self.event_time] = TIMESTAMP
        typed_expressions, expression_problems = ViewExpressions.check(self, types)
        problems += expression_problems
        types |= {name: e.type for name, e in typed_expressions.columns.items()}
        for column in [self.event_time, *self.dimensions]:
            if column not in types:
                problems.append(f"column {column!r} is in none of {self.event_types}")
        for measure in self.measures:
            extra = set(measure.event_types or []) - set(self.event_types)
            if extra:
                problems.append(f"measure {measure.name!r} counts {sorted(extra)}, "
                                "which the view does not read")
            if measure.column is None:
                continue
            column_type = types.get(measure.column)
            if column_type is None:
                problems.append(f"measure {measure.name!r}: no column {measure.column!r}")
            elif (measure.measure_kind.numeric_column and not column_type.numeric
                  or measure.measure_kind.text_column and column_type != STRING):
                problems.append(f"measure {measure.name!r}: {measure.kind} of "
                                f"{column_type.ddl} column {measure.column!r}")
        names = [m.name for m in self.measures]
        if len(set(names)) != len(names) or set(names) & set(self.key):
            problems.append("measure names must be unique and differ from the key columns")
        if problems:
            raise ViewError(f"view {self.name!r}: " + "; ".join(problems))
        self._typed = typed_expressions


    def _join_problems(self, fields: dict[str, FieldRule],
                       entities: EntityRegistry | None) -> list[str]:
        from lambdalake.contracts.registry import EntityRegistry

        entities = entities or EntityRegistry()
        problems = []
        for join in self.joins:
            if join.entity not in entities.entities:
                problems.append(f"join: unknown entity {join.entity!r}")
                continue
            contract = entities.latest(join.entity)
            if join.key not in fields:
                problems.append(f"join {join.entity}: key column {join.key!r} is in none of "
                                f"{self.event_types}")
            elif fields[join.key].spark_type != contract.fields[contract.key].spark_type:
                problems.append(f"join {join.entity}: key {join.key!r} is "
                                f"{fields[join.key].spark_type}, {contract.key!r} is not")
            for attribute in join.attributes:
                rule = contract.fields.get(attribute)
                if rule is None:
                    problems.append(f"join {join.entity}: no attribute {attribute!r}")
                elif rule.spark_type != "STRING":  # the unknown member is a string
                    problems.append(f"join {join.entity}: attribute {attribute!r} is "
                                    f"{rule.spark_type}; only STRING attributes join")
                elif attribute in fields:
                    problems.append(f"join {join.entity}: attribute {attribute!r} would hide "
                                    "the event column of that name")
        if len(set(self.joined_columns)) != len(self.joined_columns):
            problems.append("joins: an attribute is joined twice")
        return problems

    def _joined_fields(self, entities: EntityRegistry | None) -> dict[str, FieldRule]:
        from lambdalake.contracts.registry import EntityRegistry

        entities = entities or EntityRegistry()
        return {attribute: entities.latest(join.entity).fields[attribute]
                for join in self.joins if join.entity in entities.entities
                for attribute in join.attributes
                if attribute in entities.latest(join.entity).fields}


@dataclass(frozen=True)
class ViewExpressions:
    """A view's expressions, typed: its filter, its derived columns (in definition order),
    and each measure's filter by measure name."""

    filter: Expression | None = None
    columns: dict[str, Expression] = field(default_factory=dict)
    measure_filters: dict[str, Expression] = field(default_factory=dict)

    def all(self) -> list[Expression]:
        return [*([self.filter] if self.filter else []), *self.columns.values(),
                *self.measure_filters.values()]

    @classmethod
    def check(cls, view: ViewDefinition, types: dict[str, SqlType]
              ) -> tuple[ViewExpressions, list[str]]:
        """The view's expressions typed against ``types`` (the columns its events have),
        and the problems found, each naming the expression."""
        problems: list[str] = []
        known = dict(types)
        columns: dict[str, Expression] = {}
        for name, text in view.columns.items():
            if name in known:
                problems.append(f"derived column {name!r} would hide the column of that name")
                continue
            try:
                columns[name] = typed(text, known)
            except ExpressionError as error:
                problems.append(f"derived column {name!r}: {error}")
                continue
            known[name] = columns[name].type

        def condition(what: str, text: str) -> Expression | None:
            try:
                expression = typed(text, known)
            except ExpressionError as error:
                problems.append(f"{what}: {error}")
                return None
            if expression.type.name != "BOOLEAN":
                problems.append(f"{what}: {text!r} is {expression.type.ddl}, not a condition")
                return None
            return expression

        view_filter = condition("filter", view.filter) if view.filter else None
        measure_filters = {m.name: e for m in view.measures if m.filter
                           for e in [condition(f"measure {m.name!r} filter", m.filter)]
                           if e is not None}
        return cls(view_filter, columns, measure_filters), problems


def _default_contracts() -> ContractRegistry:
    from lambdalake.contracts.registry import ContractRegistry

    return ContractRegistry()


def view_names(directory: Path | None = None) -> list[str]:
    """The names of the defined views (default ``views_dir()``), without loading them
    (cheap enough for DAG parsing)."""
    return sorted(path.stem for path in (directory or views_dir()).glob("*.yaml"))


def load_views(
    directory: Path | None = None, contracts: ContractRegistry | None = None,
    entities: EntityRegistry | None = None,
) -> dict[str, ViewDefinition]:
    """Every view definition in ``directory`` (default ``views_dir()``), validated against
    the event contracts and the entity contracts (``entities``, default
    ``schemas/entities``) its joins name."""
    from lambdalake.contracts.registry import ContractRegistry

    contracts = contracts or ContractRegistry()
    views: dict[str, ViewDefinition] = {}
    for path in sorted((directory or views_dir()).glob("*.yaml")):
        try:
            view = ViewDefinition.model_validate(yaml.safe_load(path.read_text()))
        except ValueError as error:
            raise ViewError(f"{path}: {error}") from error
        if view.name != path.stem:
            raise ViewError(f"{path}: the file must be named after the view ({view.name}.yaml)")
        view.check_against(contracts, entities)
        views[view.name] = view
    if not views:
        raise ViewError(f"no view definitions in {directory}")
    return views
