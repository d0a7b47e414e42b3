import tarfile
from pathlib import Path

import pytest

from lambdalake.settings import Settings
from lambdalake.stack.jars import (
    artifact_name,
    drop_jars_pyspark_ships,
    extract_distributions,
    spark_jars,
)


@pytest.mark.parametrize(
    ("jar", "artifact"),
    [
        ("kafka-clients-3.9.0.jar", "kafka-clients"),
        ("delta-spark_2.13-4.0.0.jar", "delta-spark_2.13"),
        ("spark-sql-kafka-0-10_2.13-4.0.0.jar", "spark-sql-kafka-0-10_2.13"),
        ("zstd-jni-1.5.6-10.jar", "zstd-jni"),
        ("jsr305-3.0.0.jar", "jsr305"),
    ],
)
def test_artifact_name_strips_the_version(jar: str, artifact: str) -> None:
    assert artifact_name(Path(jar)) == artifact


def test_jars_pyspark_ships_are_dropped(tmp_path: Path) -> None:
    for name in ("scala-library-2.13.99.jar", "delta-spark_2.13-4.0.0.jar"):
        (tmp_path / name).touch()
    assert drop_jars_pyspark_ships(tmp_path) == ["scala-library-2.13.99.jar"]
    assert [p.name for p in tmp_path.iterdir()] == ["delta-spark_2.13-4.0.0.jar"]


def test_missing_jars_say_how_to_get_them(settings: Settings) -> None:
    with pytest.raises(FileNotFoundError, match="make setup"):
        spark_jars(settings)


def test_distributions_are_extracted_beside_their_archive(tmp_path: Path) -> None:
    payload = tmp_path / "payload"
    (payload / "lib" / ("a-very-long-directory-name-" * 4)).mkdir(parents=True)
    (payload / "quarkus-run.jar").write_text("jar")
    with tarfile.open(tmp_path / "app-1.0-all.tar.gz", "w:gz") as archive:
        archive.add(payload, arcname=".")
    extract_distributions(tmp_path)
    assert (tmp_path / "app-1.0-all" / "quarkus-run.jar").read_text() == "jar"
    assert not (tmp_path / "app-1.0-all.tar.gz").exists()
