"""A registry that answers with an error is a registry that cannot say: the events topic's
readers go on with the schemas they know (JSON and known ids keep flowing), as when it does
not answer at all. Tried against a real HTTP server on loopback that answers every request
with the status given."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from lambdalake.contracts.registry import ContractRegistry
from lambdalake.kafka.schema_registry import AvroSchemas, TopicSchemas, subject
from lambdalake.settings import RegistrySettings


class Registry(ThreadingHTTPServer):
    """A Confluent-compatible registry with one subject and one version of it, or one that
    answers every request with ``failing`` (a status code) once that is set."""

    failing: int | None = None


class Answer(BaseHTTPRequestHandler):
    server: Registry
    SUBJECT = subject("lambdalake.events", "other")
    SCHEMA = json.dumps({"type": "record", "name": "other", "fields": []})
    ROUTES = {"/subjects": [SUBJECT], f"/subjects/{SUBJECT}/versions": [1],
              f"/subjects/{SUBJECT}/versions/1": {"subject": SUBJECT, "version": 1, "id": 7,
                                                  "schema": SCHEMA}}

    def do_GET(self) -> None:
        path = self.path.partition("?")[0]
        status = self.server.failing or (200 if path in self.ROUTES else 404)
        body = (json.dumps(self.ROUTES[path]) if status == 200
                else json.dumps({"error_code": status * 100 + 1, "message": "refused"}))
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def registry() -> Iterator[Registry]:
    server = Registry(("127.0.0.1", 0), Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()


@pytest.mark.parametrize("status", [500, 503, 401, 404])
def test_a_registry_answering_an_error_leaves_the_known_schemas_and_says_so(
    registry: Registry, status: int
) -> None:
    url = f"http://127.0.0.1:{registry.server_address[1]}"
    schemas = TopicSchemas(RegistrySettings(url=url), ContractRegistry(), "lambdalake.events")
    known = schemas.current()
    assert known.complete and set(known.by_id) == {7}
    registry.failing = status
    during = schemas.current()
    assert not during.complete and during.by_id == known.by_id
    assert not during.outdates(known)  # a query planned with ``known`` keeps running
    registry.failing = None
    assert schemas.current().complete and not schemas.current().outdates(known)


def test_a_plan_is_outdated_by_a_new_schema_or_by_the_first_answer_it_lacked() -> None:
    schema = ("writer", "reader")
    unanswered, answered = AvroSchemas({7: schema}, complete=False), AvroSchemas(
        {7: schema}, complete=True)
    assert answered.outdates(unanswered)  # unknown ids were failing batches: quarantine now
    assert not unanswered.outdates(answered)
    assert AvroSchemas({7: schema, 8: schema}, complete=True).outdates(answered)
    assert AvroSchemas({7: schema, 8: schema}, complete=False).outdates(unanswered)
