"""The serving layer: snapshots of the batch and real-time tables (``snapshot``), the
merged query (``query``), the HTTP API and its process (``api``, ``service``),
reconciliation and maintenance (``maintenance``) and freshness (``freshness``). Above both
layers and quality; only operations, the CLI, the serving DAG and the benchmarks import it."""
