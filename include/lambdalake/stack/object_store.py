"""Object storage for a lake on ``s3a://``: how every client reaches it, and the stack's own
S3-compatible server.

delta-rs and pyarrow read the standard ``AWS_*`` environment variables and Spark's s3a its
``fs.s3a.*`` properties (its credentials, too, from those variables: the secret never
appears on a command line). ``use_object_store`` puts the settings' values into this
process's environment, so every client in it and every process it starts agree.

With ``lake.object_store.serve`` the stack runs **s3proxy** (Apache-2.0, from Maven
Central) with its filesystem backend under ``<state dir>/object-store``, bound to loopback.
That backend honours PutObject's ``If-None-Match: *`` (a second put of a key fails with
412, also between processes: it links the new file into place, which fails if one is
there), and delta-rs commits every version with exactly that conditional put: several
delta-rs writers of one table (the speed shards, the serving step) never overwrite each
other's commits. Spark's Delta commits the same way through this project's log store
(``CONDITIONAL_PUT_LOG_STORE``; Delta's own ``S3SingleDriverLogStore`` excludes writers
within one driver only), so any mix of drivers and delta-rs writers may share a table.
"""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from lambdalake.settings import Settings, get_settings
from lambdalake.stack.process import OneProcessComponent, StackError
from lambdalake.stack.secrets import local_secret

if TYPE_CHECKING:
    from pyarrow import fs

CONDITIONAL_PUT_LOG_STORE = "io.lambdalake.delta.ConditionalPutS3LogStore"
"""Delta's log store for s3a:// built in ``include/jvm/delta-log-store``."""


def credentials(settings: Settings) -> tuple[str, str] | None:
    """The access key and its secret the settings give (with ``serve``, the local secret
    is made on first use); None leaves AWS's own credential chain in charge."""
    store = settings.lake.object_store
    if store.access_key_id is None:
        return None
    if store.secret_access_key is None and not store.serve:
        raise StackError("lake.object_store.access_key_id is set but its secret_access_key "
                         "is not: set LAMBDALAKE_LAKE__OBJECT_STORE__SECRET_ACCESS_KEY")
    return store.access_key_id, local_secret(settings, "object-store-secret-key",
                                             store.secret_access_key)


def environment(settings: Settings) -> dict[str, str]:
    """The ``AWS_*`` variables delta-rs, pyarrow and the AWS SDK read for this lake."""
    store = settings.lake.object_store
    variables = {"AWS_REGION": store.region, "AWS_DEFAULT_REGION": store.region}
    if store.endpoint is not None:
        variables |= {"AWS_ENDPOINT_URL": store.endpoint,
                      "AWS_ALLOW_HTTP": str(store.endpoint.startswith("http://")).lower(),
                      "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false"}
    found = credentials(settings)
    if found is not None:
        variables |= {"AWS_ACCESS_KEY_ID": found[0], "AWS_SECRET_ACCESS_KEY": found[1]}
    return variables


def use_object_store(settings: Settings) -> None:
    """Make this process (and what it starts) reach the lake's object storage; nothing for a
    lake on local paths."""
    if settings.lake.on_object_storage:
        os.environ.update(environment(settings))


@cache
def use_process_object_store() -> None:
    """``use_object_store`` with the process's settings, once: what the lake's delta-rs and
    pyarrow readers call before they open an ``s3a://`` path."""
    use_object_store(get_settings())


def spark_properties(settings: Settings) -> dict[str, str]:
    """Spark's s3a properties for this lake (no secret: s3a reads the ``AWS_*`` variables)."""
    if not settings.lake.on_object_storage:
        return {}
    store = settings.lake.object_store
    properties = {
        "spark.hadoop.fs.s3a.endpoint.region": store.region,
        # commits with a conditional put: several drivers (and delta-rs) may write a table
        "spark.delta.logStore.s3a.impl": CONDITIONAL_PUT_LOG_STORE,
        "spark.hadoop.fs.s3a.create.conditional.enabled": "true",
    }
    if store.endpoint is not None:
        properties |= {
            "spark.hadoop.fs.s3a.endpoint": store.endpoint,
            "spark.hadoop.fs.s3a.path.style.access": str(store.path_style).lower(),
            "spark.hadoop.fs.s3a.connection.ssl.enabled":
                str(store.endpoint.startswith("https://")).lower(),
        }
    return properties


class LocalObjectStore(OneProcessComponent):
    """Start, health-check and stop the stack's s3proxy, with the lake's bucket in it."""

    label = "object storage (the lake)"
    process_name = "object-store"

    @property
    def runs_here(self) -> bool:
        return self.settings.lake.object_store.serve

    @property
    def data_dir(self) -> Path:
        """Where the filesystem backend keeps the objects: a directory per bucket."""
        return self.settings.state_dir / "object-store" / "data"

    def server_jar(self) -> str:
        assert self.settings.jars_dir is not None
        found = sorted((self.settings.jars_dir / "object-store").glob("s3proxy-*.jar"))
        if not found:
            raise StackError(f"no s3proxy in {self.settings.jars_dir}/object-store: run "
                             "`make setup` first")
        return str(found[-1])

    def prepare(self) -> str:
        """The data directory with the lake's bucket in it (the filesystem backend's bucket
        is a directory), and s3proxy's configuration (mode 0600: it holds the secret); the
        configuration's path."""
        store = self.settings.lake.object_store
        found = credentials(self.settings)
        assert found is not None, "serve sets an access key"
        (self.data_dir / store.bucket).mkdir(parents=True, exist_ok=True)
        path = self.settings.state_dir / "object-store" / "s3proxy.properties"
        path.touch(mode=0o600)
        path.write_text("\n".join([
            f"s3proxy.endpoint=http://{store.host}:{store.port}",
            "s3proxy.authorization=aws-v2-or-v4",
            f"s3proxy.identity={found[0]}",
            f"s3proxy.credential={found[1]}",
            "jclouds.provider=filesystem",
            f"jclouds.filesystem.basedir={self.data_dir}",
        ]) + "\n")
        return str(path)

    def command(self) -> list[str]:
        """s3proxy in the foreground, configured by ``prepare``."""
        return ["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-jar",
                self.server_jar(), "--properties", self.prepare()]

    def healthy(self) -> bool:
        """The server answers HTTP (403 to an unsigned request is an answer)."""
        store = self.settings.lake.object_store
        try:
            urllib.request.urlopen(f"http://{store.host}:{store.port}/", timeout=2).close()
        except urllib.error.HTTPError:
            return True
        except OSError:
            return False
        return True

    def filesystem(self) -> fs.S3FileSystem:
        """The bucket's server as a pyarrow filesystem (paths start with the bucket)."""
        from pyarrow import fs

        store = self.settings.lake.object_store
        found = credentials(self.settings)
        assert found is not None and store.endpoint is not None
        scheme, address = store.endpoint.split("://", 1)
        return fs.S3FileSystem(access_key=found[0], secret_key=found[1], region=store.region,
                               endpoint_override=address, scheme=scheme,
                               force_virtual_addressing=False)

    def start(self, timeout: float = 60.0) -> str:
        """Start unless running (or not served here); wait until it answers."""
        if not self.runs_here:
            return "object storage not run here"
        running = self.process.pid()
        pid = running or self.process.start(self.command())
        self.process.wait_until(self.healthy, timeout, "it answers HTTP")
        use_object_store(self.settings)
        return (f"object storage {'running' if running else 'started'} (pid {pid}) on "
                f"{self.settings.lake.object_store.endpoint}")

    def stop(self) -> bool:
        return self.process.stop(timeout=30)
