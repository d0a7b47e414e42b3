"""How the lake's object storage is configured for delta-rs, pyarrow and Spark (no server)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lambdalake.orchestration.spark_connect import server_environment
from lambdalake.settings import Settings
from lambdalake.spark import spark_conf
from lambdalake.stack.object_store import (
    CONDITIONAL_PUT_LOG_STORE,
    LocalObjectStore,
    StackError,
    environment,
    use_object_store,
)
from tests.support.settings_factory import MakeSettings
from tests.support.spark_settings import with_spark_jars


def served(make_settings: MakeSettings) -> Settings:
    return with_spark_jars(make_settings(lake={"object_store": {"serve": True, "port": 29901}}))


def test_serving_puts_the_lake_and_the_checkpoints_in_the_stack_s_bucket(
    make_settings: MakeSettings,
) -> None:
    settings = served(make_settings)
    assert settings.lake.root == "s3a://lambdalake/lake"
    assert settings.lake.checkpoint_root == "s3a://lambdalake/checkpoints"
    assert settings.lake.object_store.endpoint == "http://127.0.0.1:29901"
    assert settings.serving.commit_poll_seconds is None  # a lookup is a billed request there
    local = make_settings()
    assert not local.lake.on_object_storage and local.serving.commit_poll_seconds == 0.02


def test_every_client_gets_the_same_endpoint_and_the_generated_secret(
    tmp_path: Path, make_settings: MakeSettings,
) -> None:
    settings = served(make_settings)
    variables = environment(settings)
    assert variables["AWS_ENDPOINT_URL"] == "http://127.0.0.1:29901"
    assert variables["AWS_ALLOW_HTTP"] == "true"
    assert variables["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] == "false"
    assert variables["AWS_ACCESS_KEY_ID"] == "lambdalake"
    secret = (tmp_path / "secrets" / "object-store-secret-key").read_text().strip()
    assert variables["AWS_SECRET_ACCESS_KEY"] == secret and len(secret) > 30
    assert f"s3proxy.credential={secret}" in Path(LocalObjectStore(settings).prepare()).read_text()
    assert (tmp_path / "object-store" / "data" / "lambdalake").is_dir()  # the bucket
    conf = spark_conf("t", settings)
    assert conf["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:29901"
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"
    assert conf["spark.delta.logStore.s3a.impl"] == CONDITIONAL_PUT_LOG_STORE
    assert secret not in " ".join(conf.values())  # s3a reads it from the environment


def test_a_local_lake_leaves_the_environment_and_spark_alone(
    make_settings: MakeSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    settings = served(make_settings).model_copy(update={"lake": make_settings().lake})
    use_object_store(settings)
    assert "AWS_ENDPOINT_URL" not in os.environ
    assert not [key for key in spark_conf("t", settings) if "s3a" in key]


def test_an_access_key_without_its_secret_is_refused(make_settings: MakeSettings) -> None:
    settings = make_settings(lake={
        "root": "s3a://b/lake", "object_store": {"access_key_id": "k"}})
    with pytest.raises(StackError, match="SECRET_ACCESS_KEY"):
        environment(settings)


def test_the_spark_connect_server_gets_the_credentials_in_its_environment(
    make_settings: MakeSettings,
) -> None:
    """The server is a JVM started directly: s3a finds the secret only in its environment."""
    settings = served(make_settings)
    server = server_environment(settings)
    assert server["AWS_SECRET_ACCESS_KEY"] == environment(settings)["AWS_SECRET_ACCESS_KEY"]
    assert server["AWS_ENDPOINT_URL"] == "http://127.0.0.1:29901"
