"""The ingest stream: the events topic into the bronze forever store and the quarantine
(``stream``), the entities' compacted topics into their changelog and history
(``reference``), the batch layer's wait for completeness (``completeness``), and the process
(``service``, ``status``). Beside the speed layer and the batch layer, above the classified
stream they share (``lambdalake.streaming``); operations, the DAGs and the Spark entry
points import it."""
