"""The traffic generator: deterministic clickstream records (``traffic``) and the reference
data they refer to (``catalogue``), with the manifest that is the demo's, the tests' and the
benchmarks' ground truth. Above the contracts; only operations, the CLI, tests and
benchmarks import it."""
