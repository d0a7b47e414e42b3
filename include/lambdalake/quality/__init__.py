"""Quality gates: Great Expectations suites generated from the contracts and view definitions.

``lambdalake.quality.suites`` builds the suites (pure data, no Spark, a module each): a
bronze and a quarantine slice, a batch-view slice per view, an entity's history, a view's
recent real-time rows. Every expectation carries its severity (GX's
own ``severity`` field: ``critical`` blocks, ``warning`` is recorded) and, in ``meta``, a
stable ``check`` name and the ``rule`` it enforces. ``lambdalake.quality.gate`` runs a suite
against a Spark DataFrame where it lives and returns a typed ``GateResult``;
``spark_jobs/validate.py`` is the command-line gate the batch DAG calls. Above the batch
layer, the speed layer and ingest, whose outputs it gates; serving, operations and the CLI
import it.

GX is used as a library with an in-memory (ephemeral) context: no project directory, no
Data Docs site or stores of GX's own on disk (``docs`` writes a gate's pages itself), and
nothing leaves the machine. GX Core 1.24 carries no usage
statistics code and its PyPI version check is never called; ``GX_ANALYTICS_ENABLED`` is
still set to ``False`` here (before GX is imported) and the context is created with
``analytics_enabled=False``, so a GX upgrade that brings telemetry back stays silent.
"""

import os

os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")
