"""One container of the docker provider: created on its first start (through testcontainers),
then stopped, killed and started again with the same address and data, and removed.

Every container carries the owner label of :mod:`._docker_reaper` (whose watcher removes it if
this process dies first), runs on the network :mod:`._docker_network` chose, and is counted
so that the watcher ends with the last container.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from microbatch import ConfigurationError

from . import _docker_reaper
from ._docker_network import (
    ENV_DOCKER_NETWORK,
    NetworkMode,
    daemon_url,
    docker_host_address,
    has_bridge_network,
)
from ._docker_ryuk import prepare_ryuk
from ._selection import ServiceUnavailable

__all__ = ["LOCAL_IMAGE_PREFIX", "ServiceContainer"]

LOCAL_IMAGE_PREFIX = "microbatch-local/"
"""Images built on this machine (``integration/docker/ci-docker.sh images``): never pulled."""


class ServiceContainer:
    """A container of ``image`` on network ``network``, not started yet.

    ``host`` is the address this process reaches the container's services at: 127.0.0.1 in
    host mode, the Docker host (127.0.0.1 for a daemon on this machine) in bridge mode.
    Configure it with :meth:`publish`, then :meth:`start` it.
    """

    def __init__(self, image: str, *, network: NetworkMode, what: str, variable: str) -> None:
        from testcontainers.core.config import testcontainers_config
        from testcontainers.core.container import DockerContainer

        self.image, self.network, self.what, self.variable = image, network, what, variable
        self._container = DockerContainer(image)
        client = self._container.get_docker_client().client
        adapter = getattr(client.api, "_custom_adapter", None)
        daemon = daemon_url(client.api.base_url, getattr(adapter, "ssh_host", None))
        self.host, self._local = docker_host_address(daemon, testcontainers_config.tc_host_override)
        if network == "host" and not self._local:
            raise ConfigurationError(
                f"{ENV_DOCKER_NETWORK}=host needs a Docker daemon on this machine, but it "
                f"is at {self.host}: use {ENV_DOCKER_NETWORK}=bridge"
            )
        if network == "host":
            self.host = "127.0.0.1"
        self._ryuk = ""
        self._wrapped: Any = None
        self._tracked = False

    @property
    def id(self) -> str | None:
        """The container's id once created."""
        return None if self._wrapped is None else str(self._wrapped.id)

    @property
    def local(self) -> bool:
        """True when the daemon runs on this machine (its ports are then reachable from this
        machine only: host mode on 127.0.0.1, or published on 127.0.0.1)."""
        return self._local

    @property
    def note(self) -> str:
        """What was decided about testcontainers' Ryuk reaper (for the start-up line)."""
        return self._ryuk

    def publish(self, container_port: int, host_port: int) -> None:
        """In bridge mode, publish ``container_port`` on ``host_port`` of the Docker host
        (bound to 127.0.0.1 when the daemon runs here); nothing in host mode."""
        if self.network == "bridge":
            binding: Any = ("127.0.0.1", host_port) if self._local else host_port
            self._container.ports[f"{container_port}/tcp"] = binding

    def start(self, *, environment: Mapping[str, str], command: list[str] | None = None) -> None:
        """Create and start the container the first time, start it again afterwards (the
        environment and command of the first start stay)."""
        if self._wrapped is not None:
            self._wrapped.start()
            return
        container = self._container
        container.with_envs(**environment)
        if command is not None:
            container._command = command
        kwargs: dict[str, Any] = {"labels": _docker_reaper.owner_labels()}
        if self.network == "host":
            # network=None keeps testcontainers from choosing a network of its own.
            kwargs.update(network_mode="host", network=None)
        container.with_kwargs(**kwargs)
        client = container.get_docker_client().client
        if self.network == "bridge" and not has_bridge_network(client):
            raise ConfigurationError(
                f"the Docker daemon at {self.host} has no bridge network (dockerd "
                f"--bridge=none?), which {ENV_DOCKER_NETWORK}=bridge (the default) needs: set "
                f"{ENV_DOCKER_NETWORK}=host to run the containers with host networking"
            )
        self._ryuk = prepare_ryuk(client, self.network)
        self._need_image()
        _docker_reaper.track()
        self._tracked = True
        try:
            container.start()
        finally:
            self._wrapped = container._container

    def _need_image(self) -> None:
        """Pull the image unless present; a clear error when it can be neither. A
        ``microbatch-local/`` image is built on this machine, never pulled: its absence is a
        ``ServiceUnavailable`` naming the script that builds it."""
        from docker.errors import DockerException, ImageNotFound

        client = self._container.get_docker_client().client
        try:
            client.images.get(self._container.image)
            return
        except ImageNotFound:
            pass
        if self._container.image.startswith(LOCAL_IMAGE_PREFIX):
            # what a missing service is: the fixtures skip (or fail when services are required)
            raise ServiceUnavailable(
                f"the {self.what} image {self._container.image} is not present: images named "
                f"{LOCAL_IMAGE_PREFIX}... are built locally, by "
                f"`integration/docker/ci-docker.sh images`, never pulled (or name another "
                f"image in {self.variable})"
            )
        try:
            client.images.pull(self._container.image)
        except DockerException as exc:
            lines = str(exc).strip().splitlines()
            raise RuntimeError(
                f"the {self.what} image {self._container.image} is not present and cannot be "
                f"pulled ({lines[0][:300] if lines else type(exc).__name__}): pull or build it, "
                f"or name an image this daemon has in {self.variable}"
            ) from None

    def running(self) -> bool:
        """True while the container's main process runs."""
        return self.alive() and self._wrapped.status == "running"

    def alive(self) -> bool:
        """True while the container is created, running or restarting."""
        if self._wrapped is None:
            return False
        from docker.errors import NotFound

        try:
            self._wrapped.reload()
        except NotFound:
            return False
        return bool(self._wrapped.status in ("created", "running", "restarting"))

    def state(self) -> str:
        """``running``, or ``exited with code N``, for messages."""
        if self._wrapped is None:
            return "not created"
        try:
            self._wrapped.reload()
        except Exception:
            return "gone"
        state = self._wrapped.attrs.get("State", {})
        if self._wrapped.status == "exited":
            return f"exited with code {state.get('ExitCode')}"
        return str(self._wrapped.status)

    def stop(self, *, graceful: bool, signal: str = "SIGTERM", timeout: float = 30.0) -> None:
        """Stop the container, keeping it: ``graceful`` sends ``signal`` and waits up to
        ``timeout`` seconds before killing; otherwise it is killed at once (``SIGKILL``)."""
        from docker.errors import APIError

        if self._wrapped is None or not self.alive():
            return
        try:
            if graceful:
                self._wrapped.kill(signal=signal)
                try:
                    self._wrapped.wait(timeout=timeout)
                    return
                except Exception:  # still running after timeout (requests' ReadTimeout)
                    pass
            self._wrapped.kill()
        except APIError:
            if self.alive():  # not "it has just exited by itself"
                raise
        self._wrapped.wait(timeout=60)

    def logs(self, tail: int = 40) -> str:
        """The container's last ``tail`` log lines (standard output and error)."""
        if self._wrapped is None:
            return "(no container)"
        try:
            return str(self._wrapped.logs(tail=tail).decode(errors="replace")).rstrip()
        except Exception as exc:
            return f"(no logs: {exc})"

    def remove(self) -> None:
        """Remove the container and its volumes (forced); idempotent."""
        from docker.errors import NotFound

        wrapped, self._wrapped = self._wrapped, None
        try:
            if wrapped is not None:
                with contextlib.suppress(NotFound):
                    wrapped.remove(force=True, v=True)
        finally:
            if self._tracked:
                self._tracked = False
                _docker_reaper.release()
            self._container.get_docker_client().client.close()
