"""Resolve the JVM dependency manifest (``include/jvm``) into the local jar directory.

Runs at setup time only. Maven copies each module's runtime classpath into a fresh
directory, the Spark connector jars that pyspark already ships are dropped (so Spark sees
one version of each library), and the result replaces the old directory in one rename. A
stamp of the manifest's content makes a second run a no-op.
"""

from __future__ import annotations

import hashlib
import re
import shutil
from pathlib import Path

from lambdalake.settings import Settings
from lambdalake.stack.process import run_checked

_VERSIONED_JAR = re.compile(r"^(?P<artifact>.+)-\d+(?:\.\d+)+(?:[-.][\w.]+)?\.jar$")


def manifest_dir(settings: Settings) -> Path:
    """The JVM dependency manifest, ``include/jvm`` of the project (``LAMBDALAKE_PROJECT_DIR``)."""
    return settings.project_path("include", "jvm")


def manifest_digest(settings: Settings) -> str:
    """What the jar directory is built from: every module's pom and the Java it compiles."""
    digest = hashlib.sha256()
    manifest = manifest_dir(settings)
    sources = [*manifest.rglob("pom.xml"), *manifest.glob("*/src/**/*.java")]
    for source in sorted(sources):
        digest.update(source.read_bytes())
    return digest.hexdigest()[:16]


def artifact_name(jar: Path) -> str:
    """``kafka-clients-3.9.0.jar`` -> ``kafka-clients``."""
    match = _VERSIONED_JAR.match(jar.name)
    return match.group("artifact") if match else jar.stem


def pyspark_jars_dir() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def drop_jars_pyspark_ships(directory: Path) -> list[str]:
    """Remove jars whose artifact pyspark already has on its classpath; return their names."""
    shipped = {artifact_name(jar) for jar in pyspark_jars_dir().glob("*.jar")}
    dropped = []
    for jar in sorted(directory.glob("*.jar")):
        if artifact_name(jar) in shipped:
            jar.unlink()
            dropped.append(jar.name)
    return dropped


def extract_distributions(directory: Path) -> None:
    """Unpack each ``*.tar.gz`` Maven copied into ``directory`` beside it, named after it
    without the extension, and drop the archive. The system ``tar`` keeps the long names."""
    for archive in sorted(directory.glob("*.tar.gz")):
        target = directory / archive.name.removesuffix(".tar.gz")
        target.mkdir()
        run_checked(["tar", "-xzf", str(archive), "-C", str(target)],
                    directory / "extract.log")
        archive.unlink()


def resolve_jars(settings: Settings, force: bool = False) -> Path:
    """Make ``settings.jars_dir`` hold exactly what the manifest names; return it."""
    jars_dir = settings.jars_dir
    assert jars_dir is not None
    stamp = jars_dir / ".manifest-digest"
    if not force and stamp.exists() and stamp.read_text() == manifest_digest(settings):
        return jars_dir
    staging = jars_dir.with_name(jars_dir.name + ".staging")
    shutil.rmtree(staging, ignore_errors=True)
    run_checked(
        ["mvn", "-B", "-q", "-f", str(manifest_dir(settings) / "pom.xml"), "package",
         f"-Djars.dir={staging}"],
        settings.state_dir / "logs" / "setup-jars.log",
    )
    drop_jars_pyspark_ships(staging / "spark-connectors")
    extract_distributions(staging / "schema-registry")
    (staging / ".manifest-digest").write_text(manifest_digest(settings))
    shutil.rmtree(jars_dir, ignore_errors=True)
    staging.rename(jars_dir)
    return jars_dir


def spark_jars(settings: Settings) -> list[Path]:
    """The connector jars a SparkSession puts on its classpath."""
    jars = sorted(settings.spark_jars_dir.glob("*.jar"))
    if not any(artifact_name(jar).startswith("delta-spark") for jar in jars):
        raise FileNotFoundError(
            f"no Delta Lake jar in {settings.spark_jars_dir}: run `make setup` first"
        )
    return jars
