"""The speed layer's reading of in-memory events, as a micro-batched stream gives it."""

from __future__ import annotations

import random
from typing import Any

import pyarrow as pa

from lambdalake.speed.partials import merge_partials, partials_of
from lambdalake.views.definition import ViewDefinition


def merged_partials(rows: list[dict[str, Any]], schema: pa.Schema, view: ViewDefinition,
                    seed: int, largest: int) -> pa.Table:
    """``view``'s partials of ``rows`` in micro-batches of random sizes (1 to ``largest``),
    combined in a shuffled order, as the real-time table and the serving step combine them
    (``with_estimates`` turns them into answers)."""
    rng = random.Random(seed)
    batches, start = [], 0
    while start < len(rows):
        size = rng.randint(1, largest)
        batches.append(partials_of(pa.Table.from_pylist(rows[start:start + size], schema), view))
        start += size
    rng.shuffle(batches)
    return merge_partials(pa.concat_tables(batches), view)
