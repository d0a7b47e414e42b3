"""A local stack listens beyond loopback only where clients must authenticate."""

from __future__ import annotations

from pathlib import Path

import pytest

from lambdalake.stack.exposure import (
    ExposedWithoutAuthentication,
    is_loopback,
    refuse_unauthenticated_exposure,
)
from tests.support.settings_factory import MakeSettings


def test_loopback_is_only_what_cannot_leave_the_host() -> None:
    assert all(map(is_loopback, ["127.0.0.1", "127.5.0.1", "::1", "localhost"]))
    assert not any(map(is_loopback, ["0.0.0.0", "::", "10.0.0.7", "192.168.1.2", "my-host"]))


def test_the_defaults_listen_on_loopback_and_pass(make_settings: MakeSettings) -> None:
    refuse_unauthenticated_exposure(make_settings())
    refuse_unauthenticated_exposure(make_settings(lake={"object_store": {"serve": True}}))


@pytest.mark.parametrize(("overrides", "named"), [
    ({"broker": {"host": "0.0.0.0"}}, "broker.host=0.0.0.0"),
    ({"registry": {"host": "10.0.0.7"}}, "registry.host=10.0.0.7"),
    ({"spark": {"driver_host": "my-host"}}, "spark.driver_host=my-host"),
    ({"serving": {"host": "0.0.0.0"}}, "serving.host=0.0.0.0 (set serving.api_token)"),
])
def test_an_unauthenticated_listener_beyond_loopback_is_refused_naming_its_setting(
    make_settings: MakeSettings, overrides: dict[str, dict[str, str]], named: str
) -> None:
    with pytest.raises(ExposedWithoutAuthentication, match=r"refusing .*" + named.replace(
            "(", r"\(").replace(")", r"\)")):
        refuse_unauthenticated_exposure(make_settings(**overrides))


def test_authenticated_listeners_and_production_may_bind_anywhere(
    make_settings: MakeSettings,
) -> None:
    refuse_unauthenticated_exposure(make_settings(
        serving={"host": "0.0.0.0", "api_token": "a-token"},
        airflow={"host": "0.0.0.0"}, postgres={"host": "0.0.0.0"},
        lake={"object_store": {"serve": True, "host": "0.0.0.0"}},
        registry={"host": "0.0.0.0", "url": "https://registry.example:8443/apis/ccompat/v7"}))
    refuse_unauthenticated_exposure(make_settings(
        environment="production", broker={"host": "0.0.0.0"}, serving={"host": "0.0.0.0"}))


def test_up_refuses_before_it_starts_anything(make_settings: MakeSettings) -> None:
    from lambdalake.operations.platform import Platform

    started: list[str] = []

    class Component:
        label, processes = "first component", []

        def start(self) -> None:
            started.append(self.label)

        def stop(self) -> None: ...

    platform = Platform(make_settings(broker={"host": "0.0.0.0"}))
    platform.components = [Component()]
    with pytest.raises(ExposedWithoutAuthentication, match="broker.host=0.0.0.0"):
        platform.up(echo=lambda _: None)
    assert started == []


def test_make_up_says_what_to_change_and_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from lambdalake.cli.main import main

    monkeypatch.setenv("LAMBDALAKE_SERVING__HOST", "0.0.0.0")
    monkeypatch.setenv("LAMBDALAKE_STATE_DIR", str(tmp_path))
    assert main(["up"]) == 2
    assert "serving.host=0.0.0.0 (set serving.api_token)" in capsys.readouterr().err
