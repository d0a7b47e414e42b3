"""What both streams share: the events topic read and classified against the contracts
(``events``, ``classification``, ``checks``), status and batch history (``progress``), the
driver loop with its graceful stop (``runner``) and the process as a stack component
(``service``). Above the lake, Kafka and orchestration; ingest, the speed layer and quality
import it."""
