"""The ``docker`` providers: Apache Kafka and PostgreSQL in containers, through testcontainers.

Images: ``$MICROBATCH_KAFKA_IMAGE`` (default ``apache/kafka:<version>``, the version being
``$MICROBATCH_KAFKA_VERSION`` or ``DEFAULT_KAFKA_VERSION``; one KRaft node) and
``$MICROBATCH_POSTGRES_IMAGE`` (default ``postgres:17``). The Kafka container's port is bound
to a fixed free port of the Docker host, so that a restarted container keeps the address its
clients know. testcontainers' reaper removes containers left by a crashed run.
"""

from __future__ import annotations

import base64
import os
import uuid
from collections.abc import Mapping
from typing import Any

from ._kafka import BROKER_SETTINGS, KafkaService
from ._kafka_local import DEFAULT_KAFKA_VERSION
from ._postgres import PostgresService, sqlalchemy_url
from ._process import free_port

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


def _kafka_env(advertised: str, heap: str) -> dict[str, str]:
    env = {
        "KAFKA_NODE_ID": "1",
        "KAFKA_PROCESS_ROLES": "broker,controller",
        # Clients use PLAINTEXT through the published port; the broker talks to itself (for
        # transaction markers, say) on BROKER inside the container.
        "KAFKA_LISTENERS": "PLAINTEXT://0.0.0.0:9092,BROKER://0.0.0.0:19092,CONTROLLER://0.0.0.0:9093",
        "KAFKA_ADVERTISED_LISTENERS": f"PLAINTEXT://{advertised},BROKER://localhost:19092",
        "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": (
            "PLAINTEXT:PLAINTEXT,BROKER:PLAINTEXT,CONTROLLER:PLAINTEXT"
        ),
        "KAFKA_INTER_BROKER_LISTENER_NAME": "BROKER",
        "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
        "KAFKA_CONTROLLER_QUORUM_VOTERS": "1@localhost:9093",
        "KAFKA_HEAP_OPTS": heap,
        "CLUSTER_ID": base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode(),
    }
    for key, value in BROKER_SETTINGS.items():
        env["KAFKA_" + key.upper().replace(".", "_")] = value
    return env


class DockerKafka(KafkaService):
    """Apache Kafka in one container (KRaft, broker and controller in one node)."""

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
        self._heap = env.get("MICROBATCH_KAFKA_HEAP_OPTS", "-Xms128m -Xmx384m")
        self._container: Any = None
        self._running = False

    @property
    def running(self) -> bool:
        return self._running

    def start(self, *, timeout: float = 180.0) -> None:
        if self._running:
            return
        if self._container is None:
            from testcontainers.core.container import DockerContainer

            container = DockerContainer(self.image)
            host = container.get_docker_client().host()
            host = "127.0.0.1" if host in ("localhost", "") else host
            port = free_port()
            self.bootstrap_servers = f"{host}:{port}"
            container.with_bind_ports(9092, port)
            for key, value in _kafka_env(self.bootstrap_servers, self._heap).items():
                container.with_env(key, value)
            self._container = container
            container.start()
            self.description = f"Apache Kafka ({self.image} in Docker)"
        else:
            self._container.get_wrapped_container().start()
        self._running = True
        if not self.wait_ready(timeout=timeout, alive=self._container_alive):
            logs = self._container.get_wrapped_container().logs(tail=40).decode(errors="replace")
            raise RuntimeError(
                f"the Kafka container ({self.image}) did not answer on {self.bootstrap_servers} "
                f"within {timeout:.0f} s; its last log lines:\n{logs}"
            )

    def _container_alive(self) -> bool:
        wrapped = self._container.get_wrapped_container()
        wrapped.reload()
        return bool(wrapped.status in ("created", "running", "restarting"))

    def stop(self, *, graceful: bool = True) -> None:
        self._admin = None
        if self._container is not None and self._running:
            wrapped = self._container.get_wrapped_container()
            if graceful:
                wrapped.stop(timeout=30)
            else:
                wrapped.kill()
                wrapped.wait(timeout=30)
        self._running = False

    def close(self) -> None:
        super().close()
        if self._container is not None:
            self._container.stop()
            self._container = None
        self._running = False


class DockerPostgres(PostgresService):
    """PostgreSQL in a container (the official ``postgres`` image), superuser ``postgres``."""

    provider = "docker"

    def __init__(self, *, image: str | None = None, environ: Mapping[str, str] | None = None):
        super().__init__()
        env = os.environ if environ is None else environ
        self.image = image or env.get("MICROBATCH_POSTGRES_IMAGE") or DEFAULT_POSTGRES_IMAGE
        self._container: Any = None

    def start(self) -> None:
        """Start the container; returns once the server accepts connections."""
        try:
            from testcontainers.community.postgres import PostgresContainer
        except ImportError:  # testcontainers before the community namespace
            from testcontainers.postgres import PostgresContainer

        container = PostgresContainer(
            self.image, username="postgres", password="postgres", dbname="postgres"
        )
        container.with_command("postgres -c fsync=off -c max_connections=200")
        self._container = container
        container.start()
        self.url = sqlalchemy_url(container.get_connection_url())
        self.description = f"PostgreSQL ({self.image} in Docker)"

    def close(self) -> None:
        if self._container is not None:
            self._container.stop()
            self._container = None
