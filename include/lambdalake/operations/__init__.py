"""Operations across layers: the local stack as one unit, the main job (``make demo``),
the speed layer's reset and the status report. They sit above every layer they drive;
only the CLI, the restatement DAG and the benchmarks import them."""
