"""The ``docker`` providers: Apache Kafka and PostgreSQL in containers, through testcontainers.

Images: ``$MICROBATCH_KAFKA_IMAGE`` (default ``apache/kafka:<version>``, the version being
``$MICROBATCH_KAFKA_VERSION`` or ``DEFAULT_KAFKA_VERSION``; one KRaft node) and
``$MICROBATCH_POSTGRES_IMAGE`` (default ``postgres:17``). ``$MICROBATCH_DOCKER_NETWORK``
chooses bridge networking with published ports (the default) or host networking (see
:mod:`._docker_network`); either way a restarted container keeps its address. Containers are
removed by ``close()``, and by the provider's own reaper when the process that started them
ends, also by ``SIGKILL`` (:mod:`._docker_reaper`); testcontainers' Ryuk is disabled where its
image cannot be had (:mod:`._docker_ryuk`).
"""

from __future__ import annotations

import base64
import os
import secrets
import uuid
from collections.abc import Mapping

from ._docker_container import ServiceContainer
from ._docker_network import (
    KAFKA_PORT,
    POSTGRES_PORT,
    KafkaPorts,
    docker_network,
    kafka_environment,
    postgres_command,
)
from ._kafka import KafkaService
from ._kafka_local import DEFAULT_KAFKA_VERSION
from ._postgres import PostgresService
from ._process import free_port, wait_until

__all__ = [
    "DEFAULT_KAFKA_IMAGE",
    "DEFAULT_POSTGRES_IMAGE",
    "DockerKafka",
    "DockerPostgres",
    "docker_problem",
]

DEFAULT_KAFKA_IMAGE = f"apache/kafka:{DEFAULT_KAFKA_VERSION}"
DEFAULT_POSTGRES_IMAGE = "postgres:17"
_PACKAGES_HINT = "pip install 'microbatch-testkit[services]'"


def docker_problem(environ: Mapping[str, str] | None = None) -> str | None:
    """Why no Docker daemon can be used (package missing, daemon silent), or None if one answers."""
    try:
        import docker
        import testcontainers  # noqa: F401  # the provider needs it, so its absence is a problem
    except ImportError as exc:
        return f"the Python package {exc.name!r} is not installed ({_PACKAGES_HINT})"
    env = dict(os.environ if environ is None else environ)
    try:
        client = docker.from_env(environment=env, timeout=5)
        try:
            client.ping()
        finally:
            client.close()
    except Exception as exc:  # DockerException, or a connection error from requests
        where = env.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
        return f"no Docker daemon answers at {where} ({_short(exc)})"
    return None


def _short(exc: BaseException) -> str:
    text = str(exc)
    if "FileNotFoundError" in text or "No such file" in text:
        return "no such socket"
    if "Connection refused" in text:
        return "connection refused"
    if "Permission denied" in text:
        return "permission denied on the socket"
    lines = text.strip().splitlines()
    return lines[0][:200] if lines else type(exc).__name__


def _free_ports(count: int) -> list[int]:
    """``count`` distinct free 127.0.0.1 ports."""
    ports: list[int] = []
    while len(ports) < count:
        port = free_port()
        if port not in ports:
            ports.append(port)
    return ports


class _InContainer:
    """What both docker services say about their container."""

    _container: ServiceContainer | None
    _running: bool

    @property
    def running(self) -> bool:
        return self._running

    @property
    def container_id(self) -> str | None:
        """The container's id once started."""
        return None if self._container is None else self._container.id

    @property
    def note(self) -> str:
        """What the start-up line adds: whether testcontainers' Ryuk runs."""
        return self._container.note if self._container is not None else ""


class DockerKafka(_InContainer, KafkaService):
    """Apache Kafka in one container (KRaft, broker and controller in one node).

    Its address stays the same across :meth:`stop` and :meth:`start` (and so does its data,
    kept in the container): in bridge mode the client port is published on a fixed free port,
    in host mode the broker listens on fixed free 127.0.0.1 ports. Ready once the broker
    answering there reports the cluster id the container was formatted with (another server
    on the port is an error).
    """

    provider = "docker"
    can_restart = True

    def __init__(self, *, image: str | None = None, environ: Mapping[str, str] | None = None):
        super().__init__()
        env = os.environ if environ is None else environ
        version = env.get("MICROBATCH_KAFKA_VERSION")
        self.image = (
            image
            or env.get("MICROBATCH_KAFKA_IMAGE")
            or (f"apache/kafka:{version}" if version else DEFAULT_KAFKA_IMAGE)
        )
        self.network = docker_network(env)
        self._heap = env.get("MICROBATCH_KAFKA_HEAP_OPTS", "-Xms128m -Xmx384m")
        self._jvm = env.get("MICROBATCH_KAFKA_JVM_OPTS", "")
        self._container: ServiceContainer | None = None
        self._running = False
        self._cluster_id = ""

    def start(self, *, timeout: float = 180.0) -> None:
        """Start the broker (creating its container the first time); returns once it answers."""
        if self._running:
            return
        if self._container is None:
            container = ServiceContainer(
                self.image, network=self.network, what="Kafka", variable="MICROBATCH_KAFKA_IMAGE"
            )
            self._container = container
            if self.network == "host":
                ports = KafkaPorts(*_free_ports(3))
            else:
                ports = KafkaPorts(_free_ports(1)[0])
                container.publish(KAFKA_PORT, ports.client)
            self.bootstrap_servers = f"{container.host}:{ports.client}"
            cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
            environment = kafka_environment(
                self.network,
                host=container.host,
                ports=ports,
                heap=self._heap,
                cluster_id=cluster_id,
                jvm=self._jvm,
            )
            self.description = f"Apache Kafka ({self.image} in Docker, {self.network} network)"
            self._cluster_id = cluster_id
            container.start(environment=environment)
        else:
            self._container.start(environment={})
        self._running = True
        container = self._container
        if not self.wait_ready(timeout=timeout, alive=container.alive):
            raise RuntimeError(
                f"the Kafka container ({self.image}) did not answer on {self.bootstrap_servers} "
                f"within {timeout:.0f} s ({container.state()}); its last log lines:\n"
                f"{container.logs()}"
            )
        answered = self.admin().list_topics(timeout=10).cluster_id
        if answered != self._cluster_id or not container.running():
            raise RuntimeError(
                f"the Kafka broker answering on {self.bootstrap_servers} is not this "
                f"container's (cluster id {answered!r}, expected {self._cluster_id!r}; the "
                f"container is {container.state()}): another server took the port"
            )

    def stop(self, *, graceful: bool = True) -> None:
        """Stop the broker (``SIGTERM``, a controlled shutdown; ``graceful=False``: ``SIGKILL``),
        keeping its container, address and data."""
        self._admin = None
        if self._container is not None and self._running:
            self._container.stop(graceful=graceful, signal="SIGTERM", timeout=30)
        self._running = False

    def close(self) -> None:
        super().close()
        if self._container is not None:
            self._container.remove()
            self._container = None
        self._running = False


class DockerPostgres(_InContainer, PostgresService):
    """PostgreSQL in a container (the official ``postgres`` image or one that behaves like it),
    superuser ``postgres``: without a password (trust) when the daemon runs on this machine,
    whose loopback alone reaches the server, as with the local provider; with a random one
    (hidden in ``repr`` and errors) on a remote Docker host.

    Ready once a connection succeeds (the image first runs a server on its unix socket only,
    and in bridge mode Docker accepts TCP connections before the server listens) to the
    container's own server: it runs with a ``cluster_name`` of its own, checked then, so that
    another server on the same port is an error, not a false start. It stops and
    starts again on the same address with the same data (:meth:`stop`, :meth:`start`).
    """

    provider = "docker"
    can_restart = True

    def __init__(self, *, image: str | None = None, environ: Mapping[str, str] | None = None):
        super().__init__()
        env = os.environ if environ is None else environ
        self.image = image or env.get("MICROBATCH_POSTGRES_IMAGE") or DEFAULT_POSTGRES_IMAGE
        self.network = docker_network(env)
        self._container: ServiceContainer | None = None
        self._running = False
        self._marker = ""

    def start(self, *, timeout: float = 120.0) -> None:
        """Start the server (creating its container the first time: initdb runs then);
        returns once it accepts connections."""
        if self._running:
            return
        if self._container is None:
            container = ServiceContainer(
                self.image,
                network=self.network,
                what="PostgreSQL",
                variable="MICROBATCH_POSTGRES_IMAGE",
            )
            self._container = container
            port = free_port()
            container.publish(POSTGRES_PORT, port)
            environment = {"POSTGRES_USER": "postgres", "POSTGRES_DB": "postgres"}
            user = "postgres"
            if container.local:  # reachable from this machine only: no password, as local
                environment["POSTGRES_HOST_AUTH_METHOD"] = "trust"
            else:
                password = secrets.token_hex(12)
                environment["POSTGRES_PASSWORD"] = password
                user = f"postgres:{password}"
            self._address = f"{container.host}:{port}"
            self.url = f"postgresql+psycopg://{user}@{self._address}/postgres"
            self.description = f"PostgreSQL ({self.image} in Docker, {self.network} network)"
            self._marker = f"microbatch-{uuid.uuid4().hex[:12]}"
            container.start(
                environment=environment,
                command=postgres_command(self.network, port, cluster_name=self._marker),
            )
        else:
            self._container.start(environment={})
        self._running = True
        container = self._container
        if not wait_until(
            self.accepts_connections, timeout=timeout, alive=container.alive, interval=0.1
        ):
            raise RuntimeError(
                f"the PostgreSQL container ({self.image}) did not accept connections on "
                f"{self._address} within {timeout:.0f} s ({container.state()}); its last log "
                f"lines:\n{container.logs()}"
            )
        answered = self._cluster_name()
        if answered != self._marker or not container.running():
            raise RuntimeError(
                f"the PostgreSQL server answering on {self._address} is not this container's "
                f"(cluster_name {answered!r}, expected {self._marker!r}; the container is "
                f"{container.state()}): another server took the port"
            )

    def _cluster_name(self) -> str | None:
        """The answering server's ``cluster_name`` (None when it cannot be read)."""
        import psycopg

        try:
            with psycopg.connect(self.dsn, connect_timeout=5) as connection:
                row = connection.execute("SHOW cluster_name").fetchone()
        except psycopg.Error:
            return None
        return None if row is None else str(row[0])

    def stop(self, *, graceful: bool = True) -> None:
        """Stop the server, keeping its container, address and data: ``graceful`` is
        PostgreSQL's fast shutdown (``SIGINT``: open sessions end with an error),
        ``graceful=False`` kills it (``SIGKILL``; the next start recovers from the WAL)."""
        if self._container is not None and self._running:
            self._container.stop(graceful=graceful, signal="SIGINT", timeout=30)
        self._running = False

    def close(self) -> None:
        if self._container is not None:
            self._container.remove()
            self._container = None
        self._running = False
