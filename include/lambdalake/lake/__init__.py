"""The lake: bronze and quarantine (``bronze``, ``bronze_log``), every table read or
written with delta-rs (``delta_rs``), the one retry of a commit that lost a race
(``commits``), the entities' changelog, history and current state (``reference``), the
streams' batch ledger (``ledger``), Delta checkpoints (``checkpoints``) and DuckDB over
slices (``sql``). Above the contracts and the object store's configuration; every layer
above reads and writes through it."""
