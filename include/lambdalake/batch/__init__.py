"""The batch layer: recomputing a view's slices from bronze (``recompute``) into a run's
staging tables, copied into the served ones once gated (``staging``: write-audit-publish),
publishing them and the high-water marks (``publication``), finding late rows and
restating their windows (``late_arrivals``, ``restatement``), the batch DAG's steps
(``steps``) and what a step wrote, as it crosses processes and XCom (``written``).
Beside the speed layer, above the view definitions both share (``lambdalake.views``);
quality, serving, operations and the edges (DAGs, Spark entry points) import it, never
the streams."""
