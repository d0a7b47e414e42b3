"""Diagnostics: profiles run by hand (``python -m bench.diagnostics.<name>``) to see where a
benchmark's time goes; ``make bench`` does not run them. They import ``bench.harness``, not
the benchmarks."""
