"""The ``lambdalake`` command line, one module per command group: ``stack`` (setup, up,
down, clean, status, Airflow, Spark Connect, the object store, the streams), ``data`` (demo,
produce, contracts, query, sql, recompute), ``quality`` (quality, report) and ``docs``
(settings, docs); ``main`` assembles the parser. The top layer: it drives operations and
every layer below, and nothing imports it."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    import argparse

    Commands: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]
    """The subparsers each group adds its commands to."""
