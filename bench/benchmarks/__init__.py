"""The benchmarks `make bench` runs (``bench.run``): each measures the platform beside a
bare baseline in the same run and returns ``Result`` rows. None imports another: what two
of them measure alike is in ``bench.harness``."""
