"""What the benchmarks and diagnostics share: results, baselines, resource sampling and
fresh runs (``common``), the charts (``plots``), and the measurements more than one of them
takes, so that no benchmark imports another: ingest's drain of a backlog, its bare-consumer
baseline and bronze's visibility delays (``ingest_runs``), the speed layer's freshness,
throughput and sustained-rate runs (``speed_runs``), the batch benchmarks' generated bronze
(``synthetic_bronze``) and the batch DAG's runs through Airflow on a stack of its own
(``airflow_runs``)."""
