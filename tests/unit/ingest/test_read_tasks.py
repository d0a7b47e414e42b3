"""How many tasks a micro-batch's Kafka read is split into."""

from __future__ import annotations

import pytest

from lambdalake.ingest.stream import read_tasks


@pytest.mark.parametrize(("partitions", "cores", "tasks"), [
    (3, 2, 4),  # the default topic on this machine: two full waves instead of one and a half
    (6, 2, 6),  # already whole waves: one task per partition
    (3, 8, 8),  # more cores than partitions: a backlog's partitions split to use them all
    (1, 1, 1),
])
def test_by_default_the_read_fills_whole_waves_of_cores(partitions: int, cores: int,
                                                         tasks: int) -> None:
    assert read_tasks(0, partitions, cores) == tasks


def test_a_configured_number_of_tasks_is_taken_as_it_is() -> None:
    assert read_tasks(5, 3, 2) == 5
