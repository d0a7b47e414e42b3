"""A batch run's compute and publish without its gates or its publication log: what tests
and benchmarks that need a view's served rows (and not the DAG around them) run."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from lambdalake.batch.recompute import stage_views
from lambdalake.batch.staging import discard_run, promote_run
from lambdalake.batch.written import SliceWritten
from lambdalake.settings import Settings
from lambdalake.views.definition import ViewDefinition

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def stage_and_promote(
    spark: SparkSession, settings: Settings, views: Sequence[ViewDefinition], start: datetime,
    end: datetime, run_id: str, bronze_version: int | None = None,
) -> list[SliceWritten]:
    """Stage every view's slice [start, end), then promote it into the table readers use, as
    the run's ``publish`` does once its gate passed; the staging tables are removed."""
    written = stage_views(spark, settings, views, start, end, run_id, bronze_version)
    names = [w.view for w in written]
    versions = promote_run(settings, run_id, start, end,
                           {w.view: w.bronze_version for w in written})
    discard_run(settings, run_id, start, end, names)
    return [dataclasses.replace(w, view_version=versions[w.view]) for w in written]
