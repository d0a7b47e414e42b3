"""lambdalake's benchmarks: `make bench` (quick profile) or `python -m bench.run --profile full`."""
