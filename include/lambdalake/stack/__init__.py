"""The local stack's processes, below every layer: PID files, process groups and health
waits (``process``), each component's own start (``kafka_broker``, ``postgres``,
``airflow``, ``object_store``, ``spark_standalone``), the JVM jars (``jars``) and the
generated secrets (``secrets``). Imports only the settings."""
