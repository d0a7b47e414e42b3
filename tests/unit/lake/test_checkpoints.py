import pytest

from lambdalake.lake.checkpoints import checkpoint_due


@pytest.mark.parametrize(("version", "checkpointed", "due"), [
    (0, -1, False),    # a new table: nothing to summarise
    (99, -1, False),
    (100, -1, True),
    (150, 100, False),
    (200, 100, True),
    (350, 100, True),  # several intervals behind (the writer was busy): one checkpoint
])
def test_a_table_is_due_a_checkpoint_every_n_commits(version: int, checkpointed: int,
                                                     due: bool) -> None:
    assert checkpoint_due(version, checkpointed, every=100) is due
