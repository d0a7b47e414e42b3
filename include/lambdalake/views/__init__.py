"""What a view is, for both layers: definitions (``definition``), measure kinds
(``measures``), the aggregation (``aggregate``), as-of enrichment (``enrichment``) and the
catalog of physical tables (``catalog``). The batch layer, the speed layer, quality and
serving import it; it imports the lake, the contracts and the settings below it."""

PUBLISHED_ALIAS = "lambdalake_published_views"
"""The Airflow asset alias the batch DAG's ``publish`` emits through: one event for each view
it published, on that view's asset (``view_asset_uri``). An alias, because a task's static
outlets each get an event whenever it succeeds, and a run publishes only its chosen views."""

VIEW_ASSET_PREFIX = "lambdalake://views/"


def view_asset_uri(view: str) -> str:
    """The URI (and name) of a view's Airflow asset, ``lambdalake://views/<view>``: what a DAG
    that waits for the view schedules on. Airflow takes any scheme but ``airflow`` as it is,
    and a view's name (``[a-z][a-z0-9_]*``) needs no quoting."""
    return VIEW_ASSET_PREFIX + view
