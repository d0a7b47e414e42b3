"""How Airflow runs the platform's Spark work: the Spark entry points run in a child
process (``spark_jobs``), the Spark Connect server the batch tasks use (``spark_connect``),
the warm LocalExecutor (``executor``), a REST client for Airflow (``airflow_api``) and the
smoke pipeline (``smoke``). Above the stack, Spark and Kafka, beside the view definitions
(it knows no layer); the streams, the batch layer, operations and the DAGs import it."""
