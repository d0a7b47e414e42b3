"""Kafka from the platform's side: topics made from the settings (``topics``), the
idempotent producer (``producer``), contracts as Avro subjects in the schema registry
(``schema_registry``) and the stack's Apicurio (``registry_server``). Above the contracts
and the stack's process helpers; the streams, the generator's callers and operations
import it."""
