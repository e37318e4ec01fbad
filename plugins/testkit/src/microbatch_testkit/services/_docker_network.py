"""How the docker provider's containers are reached: ``MICROBATCH_DOCKER_NETWORK``.

- ``bridge`` (the default): the container runs on Docker's default bridge network and its
  port is published on a free port of the Docker host (bound to 127.0.0.1 when the daemon runs
  on this machine), chosen once so that a restarted container keeps its address.
- ``host``: the container shares the host's network (``network_mode="host"``) and listens on
  free 127.0.0.1 ports of this machine; nothing is published. For a daemon on this machine
  without a bridge network (``dockerd --bridge=none``), as in CI.
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from microbatch import ConfigurationError

from ._kafka import BROKER_SETTINGS

__all__ = [
    "ENV_DOCKER_NETWORK",
    "NETWORK_MODES",
    "KafkaPorts",
    "NetworkMode",
    "daemon_url",
    "docker_host_address",
    "docker_network",
    "has_bridge_network",
    "kafka_environment",
    "postgres_command",
]

ENV_DOCKER_NETWORK = "MICROBATCH_DOCKER_NETWORK"
NETWORK_MODES = ("bridge", "host")
NetworkMode = Literal["bridge", "host"]

KAFKA_PORT = 9092
"""The client listener's port inside a bridged Kafka container."""
POSTGRES_PORT = 5432
"""The server's port inside a bridged PostgreSQL container."""


JVM_PERFORMANCE_OPTS = (
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:+ExitOnOutOfMemoryError",
    "-Djava.awt.headless=true",
)
"""The broker JVM's options besides the heap (``KAFKA_JVM_PERFORMANCE_OPTS``)."""


def docker_network(environ: Mapping[str, str] | None = None) -> NetworkMode:
    """The network mode ``MICROBATCH_DOCKER_NETWORK`` asks for (``bridge`` when unset).

    Raises ``ConfigurationError`` naming the variable and its values for anything else.
    """
    env = os.environ if environ is None else environ
    raw = env.get(ENV_DOCKER_NETWORK, "")
    value = raw.strip().lower() or "bridge"
    if value == "bridge":
        return "bridge"
    if value == "host":
        return "host"
    raise ConfigurationError(
        f"{ENV_DOCKER_NETWORK}={raw!r} is not a network mode: use bridge (the default: "
        "published ports on the Docker host) or host (host networking, 127.0.0.1 ports)"
    )


def daemon_url(base_url: str, ssh_host: str | None = None) -> str:
    """The daemon's address in ``DOCKER_HOST`` form from docker-py's ``APIClient.base_url``
    (``http+docker://localhost`` is a unix socket, ``http+docker://ssh`` the ``ssh_host`` its
    SSH adapter holds, ``http(s)://host:port`` a TCP address)."""
    url = urllib.parse.urlparse(base_url)
    if url.scheme == "http+docker":
        if url.hostname == "ssh":
            return f"ssh://{ssh_host or ''}"
        return "npipe://" if url.hostname == "localnpipe" else "unix://"
    if url.scheme in ("http", "https"):
        return f"tcp://{url.netloc}"
    return base_url


_LOCAL_NAMES = ("localhost", "127.0.0.1", "::1")


def docker_host_address(daemon: str, override: str | None = None) -> tuple[str, bool]:
    """The address of the Docker host as this process reaches it, and whether it is this
    machine, from the daemon's address (``DOCKER_HOST`` form, see :func:`daemon_url`).

    Local only for a unix socket (or Windows' named pipe) and ``tcp://`` to localhost,
    127.0.0.1 or ::1 (address 127.0.0.1); anything else, ``ssh://`` included, is a remote
    host named by its host part. testcontainers' ``TC_HOST`` ``override`` wins.
    """
    if override:
        local = override in _LOCAL_NAMES
        return ("127.0.0.1" if override == "localhost" else override), local
    url = urllib.parse.urlparse(daemon)
    hostname = url.hostname or ""
    if url.scheme in ("unix", "npipe", "http+unix"):
        return "127.0.0.1", True
    if url.scheme in ("tcp", "http", "https") and hostname in _LOCAL_NAMES:
        return "127.0.0.1", True
    return ("127.0.0.1" if hostname == "localhost" else hostname), False


def has_bridge_network(client: Any) -> bool:
    """True when the daemon (a ``docker.DockerClient``) has its default ``bridge`` network."""
    return any(network.name == "bridge" for network in client.networks.list(names=["bridge"]))


@dataclass(frozen=True)
class KafkaPorts:
    """The broker's ports: ``client`` (PLAINTEXT, what clients use), ``broker`` (BROKER, the
    broker talking to itself, for transaction markers) and ``controller`` (CONTROLLER).

    In bridge mode ``client`` is the published port on the Docker host and the other two stay
    inside the container; in host mode all three are 127.0.0.1 ports of this machine.
    """

    client: int
    broker: int = 19092
    controller: int = 9093


def kafka_environment(
    mode: NetworkMode,
    *,
    host: str,
    ports: KafkaPorts,
    heap: str,
    cluster_id: str,
    jvm: str = "",
) -> dict[str, str]:
    """The environment of a one-node KRaft Kafka container (as ``apache/kafka`` reads it).

    ``host`` is the address clients use (the Docker host in bridge mode, 127.0.0.1 in host
    mode); the advertised PLAINTEXT listener is ``host:ports.client``. The JVM runs with the
    serial collector and C1 only (it starts a few seconds sooner; test loads are light), then
    the options in ``jvm``, which win.
    """
    if mode == "host":
        listen = "127.0.0.1"
        listeners = (
            f"PLAINTEXT://{listen}:{ports.client},BROKER://{listen}:{ports.broker},"
            f"CONTROLLER://{listen}:{ports.controller}"
        )
        internal = f"{listen}:{ports.broker}"
        voters = f"1@{listen}:{ports.controller}"
    else:
        listeners = (
            f"PLAINTEXT://0.0.0.0:{KAFKA_PORT},BROKER://0.0.0.0:{ports.broker},"
            f"CONTROLLER://0.0.0.0:{ports.controller}"
        )
        internal = f"localhost:{ports.broker}"
        voters = f"1@localhost:{ports.controller}"
    env = {
        "KAFKA_NODE_ID": "1",
        "KAFKA_PROCESS_ROLES": "broker,controller",
        "KAFKA_LISTENERS": listeners,
        "KAFKA_ADVERTISED_LISTENERS": f"PLAINTEXT://{host}:{ports.client},BROKER://{internal}",
        "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": (
            "PLAINTEXT:PLAINTEXT,BROKER:PLAINTEXT,CONTROLLER:PLAINTEXT"
        ),
        "KAFKA_INTER_BROKER_LISTENER_NAME": "BROKER",
        "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
        "KAFKA_CONTROLLER_QUORUM_VOTERS": voters,
        "KAFKA_HEAP_OPTS": heap,
        "KAFKA_JVM_PERFORMANCE_OPTS": " ".join([*JVM_PERFORMANCE_OPTS, *jvm.split()]),
        "CLUSTER_ID": cluster_id,
    }
    for key, value in BROKER_SETTINGS.items():
        env["KAFKA_" + key.upper().replace(".", "_")] = value
    return env


def postgres_command(mode: NetworkMode, port: int, *, cluster_name: str = "") -> list[str]:
    """The container's command: ``postgres -c ...`` (in host mode on 127.0.0.1:``port``);
    ``cluster_name`` names the server (how the provider knows it is the one answering)."""
    settings = ["fsync=off", "max_connections=200"]
    if cluster_name:
        settings.append(f"cluster_name={cluster_name}")
    if mode == "host":
        settings = [f"port={port}", "listen_addresses=127.0.0.1", *settings]
    command = ["postgres"]
    for setting in settings:
        command += ["-c", setting]
    return command
