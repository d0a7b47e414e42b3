"""Finding a Java the schema registry can run on, or saying clearly that there is none."""

from __future__ import annotations

from pathlib import Path

import pytest

from lambdalake.kafka import registry_server
from lambdalake.kafka.registry_server import find_java, java_major_version
from lambdalake.stack.process import StackError


def fake_java_home(root: Path, name: str, version: str) -> Path:
    home = root / name
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "java").touch()
    (home / "release").write_text(f'IMPLEMENTOR="x"\nJAVA_VERSION="{version}"\n')
    return home


def test_the_release_file_tells_the_java_version(tmp_path: Path) -> None:
    assert java_major_version(fake_java_home(tmp_path, "j17", "17.0.12")) == 17
    assert java_major_version(fake_java_home(tmp_path, "j25", "25.0.1")) == 25
    assert java_major_version(tmp_path / "nothing") is None


def test_the_newest_java_21_or_later_is_chosen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_java_home(tmp_path, "java-17", "17.0.12")
    fake_java_home(tmp_path, "java-21", "21.0.5")
    fake_java_home(tmp_path, "java-25", "25.0.1")
    monkeypatch.setattr(registry_server, "JVM_DIRS", tmp_path)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "java-17"))
    assert find_java(None) == tmp_path / "java-25" / "bin" / "java"
    assert find_java(tmp_path / "java-21") == tmp_path / "java-21" / "bin" / "java"


def test_without_a_java_21_the_error_says_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_java_home(tmp_path, "java-17", "17.0.12")
    monkeypatch.setattr(registry_server, "JVM_DIRS", tmp_path)
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(StackError, match=r"Java 21 or newer; found \[17\].*REGISTRY__JAVA_HOME"):
        find_java(None)
    with pytest.raises(StackError, match="is not a Java 21"):
        find_java(tmp_path / "java-17")
