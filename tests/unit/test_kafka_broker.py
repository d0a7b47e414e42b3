"""KRaft cluster ids the storage tool accepts."""

import base64
import uuid
from unittest import mock

from lambdalake.stack import kafka_broker


def test_kafka_cluster_ids_never_look_like_an_option() -> None:
    dashed = uuid.UUID(bytes=base64.urlsafe_b64decode("-QX2hUalQXSlajKRg5LpoA=="))
    plain = uuid.UUID(int=1)
    with mock.patch.object(kafka_broker.uuid, "uuid4", side_effect=[dashed, plain]):
        assert kafka_broker.new_cluster_id() == "AAAAAAAAAAAAAAAAAAAAAQ"
