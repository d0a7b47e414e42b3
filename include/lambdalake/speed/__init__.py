"""The speed layer: one query per lateness allowance over the classified events stream
(``stream``), partials (``partials``), deduplication (``dedup``), the real-time tables
(``realtime``: their one owner), the joined entities' current state (``reference_state``),
shards (``shards``), the processes (``service``) and their supervisor (``supervisor``).
Beside the batch layer and ingest, above ``lambdalake.streaming`` and ``lambdalake.views``;
quality, serving and operations import it."""
