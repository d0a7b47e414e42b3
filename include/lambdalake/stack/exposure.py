"""Which addresses the local stack listens on, and whether a client must authenticate at
each: ``up`` refuses, in local mode, to bind one that asks nobody beyond loopback, so a
changed ``host`` setting cannot open the broker or the registry to the network by accident.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from lambdalake.settings import Settings
from lambdalake.stack.process import StackError


class ExposedWithoutAuthentication(StackError):
    """A listener of the local stack would bind beyond loopback with no authentication
    (a ``StackError``: the CLI prints it and exits 2)."""


@dataclass(frozen=True)
class Listener:
    setting: str
    host: str
    authentication: str | None
    """How a client authenticates there; None: it is not asked to."""
    remedy: str
    """What to change when ``authentication`` is None and ``host`` is not loopback."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may resolve anywhere
        return False


def local_listeners(settings: Settings) -> list[Listener]:
    """The listeners a ``make up`` stack of these settings starts."""
    serving_token = settings.serving.api_token is not None
    listeners = [
        Listener("broker.host", settings.broker.host, None,
                 "the local broker has PLAINTEXT listeners only: use a Kafka cluster with "
                 "SASL or SSL through kafka.bootstrap_servers"),
        Listener("postgres.host", settings.postgres.host, "password (scram-sha-256)", ""),
        Listener("spark.driver_host", settings.spark.driver_host, None,
                 "Spark's driver RPC runs without spark.authenticate, and pyspark sends the "
                 "Connect token in clear to any host but localhost: run Spark as a cluster "
                 "with TLS (spark.master, spark.connect_url)"),
        Listener("serving.host", settings.serving.host,
                 "bearer token (serving.api_token)" if serving_token else None,
                 "set serving.api_token"),
        Listener("airflow.host", settings.airflow.host, "login (Airflow's auth manager)", ""),
    ]
    if not settings.registry.url:
        listeners.append(Listener(
            "registry.host", settings.registry.host, None,
            "the local registry has no authentication: name a registry that has it in "
            "registry.url"))
    if settings.lake.object_store.serve:
        listeners.append(Listener("lake.object_store.host", settings.lake.object_store.host,
                                  "signed requests (the stack's S3 key)", ""))
    return listeners


def refuse_unauthenticated_exposure(settings: Settings) -> None:
    """Raise, naming each setting and what to change, where local mode would listen beyond
    loopback without authentication. Production deployments choose their own network."""
    if settings.environment != "local":
        return
    exposed = [listener for listener in local_listeners(settings)
               if listener.authentication is None and not is_loopback(listener.host)]
    if exposed:
        raise ExposedWithoutAuthentication("refusing to listen beyond loopback without "
                                           "authentication: " + "; ".join(
            f"{listener.setting}={listener.host} ({listener.remedy})" for listener in exposed))
