"""KRaft cluster ids the storage tool accepts; a node starts only once its ports are free."""

import base64
import socket
import uuid
from unittest import mock

import pytest

from lambdalake.stack import kafka_broker
from lambdalake.stack.process import StackError


def test_kafka_cluster_ids_never_look_like_an_option() -> None:
    dashed = uuid.UUID(bytes=base64.urlsafe_b64decode("-QX2hUalQXSlajKRg5LpoA=="))
    plain = uuid.UUID(int=1)
    with mock.patch.object(kafka_broker.uuid, "uuid4", side_effect=[dashed, plain]):
        assert kafka_broker.new_cluster_id() == "AAAAAAAAAAAAAAAAAAAAAQ"


def test_a_node_waits_while_an_other_socket_holds_its_port() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        port = holder.getsockname()[1]
        with pytest.raises(StackError, match=f"127.0.0.1:{port} is still in use"):
            kafka_broker.wait_until_bindable("127.0.0.1", [port], timeout=1.0)
    kafka_broker.wait_until_bindable("127.0.0.1", [port], timeout=1.0)  # released: no wait
