"""How Airflow runs the platform's Spark work: the Spark entry points run in a child
process (``spark_jobs``), the Spark Connect server the batch tasks use (``spark_connect``),
the warm LocalExecutor (``executor``), a REST client for Airflow (``airflow_api``) and the
smoke pipeline (``smoke``). Knows no layer: it stands beside the view definitions, and the
streams, the batch layer and operations import it."""
