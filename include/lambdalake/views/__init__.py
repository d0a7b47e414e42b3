"""What a view is, for both layers: definitions (``definition``), measure kinds
(``measures``), the aggregation (``aggregate``), as-of enrichment (``enrichment``) and the
catalog of physical tables (``catalog``). The batch layer, the speed layer, quality and
serving import it; it imports the lake, the contracts and the settings below it."""

PUBLISHED_ASSET = "lambdalake_batch_views"
"""The Airflow asset the batch DAG's ``publish`` emits; the serving DAG runs on it."""
