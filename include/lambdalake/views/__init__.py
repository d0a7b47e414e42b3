"""View definitions and the batch layer's computation, catalog and publication log."""

PUBLISHED_ASSET = "lambdalake_batch_views"
"""The Airflow asset the batch DAG's ``publish`` emits; the serving DAG runs on it."""
