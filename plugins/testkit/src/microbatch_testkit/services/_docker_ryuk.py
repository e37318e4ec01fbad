"""Whether testcontainers' own reaper (Ryuk, a container of its own) runs in this process.

testcontainers starts a Ryuk container before the first container unless
``TESTCONTAINERS_RYUK_DISABLED`` (or ``ryuk.disabled`` in ``~/.testcontainers.properties``)
says otherwise. With host networking (``MICROBATCH_DOCKER_NETWORK=host``) the provider always
disables it: Ryuk's own container would need the bridge network. Where its image
(``testcontainers/ryuk``, or ``$RYUK_CONTAINER_IMAGE``) can be neither found locally nor
pulled, every container start would fail; so, unless the variable is set (then
testcontainers' answer stands), the provider disables Ryuk itself in that case and logs why.
Its own reaper (:mod:`._docker_reaper`) removes the containers either way.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

__all__ = ["ENV_RYUK_DISABLED", "prepare_ryuk"]

ENV_RYUK_DISABLED = "TESTCONTAINERS_RYUK_DISABLED"
_logger = logging.getLogger(__name__)
_lock = threading.Lock()
_decided: str | None = None


def prepare_ryuk(client: Any, network: str = "bridge") -> str:
    """Decide once per process whether Ryuk runs (``client``: a ``docker.DockerClient``);
    returns what was decided, for the start-up line.

    With host networking (``network="host"``) Ryuk is always disabled: its container needs
    the bridge network (testcontainers reaches it through a published port).
    """
    global _decided
    with _lock:
        if network == "host":
            return _disable_for_host_networking()
        if _decided is None:
            _decided = _decide(client)
        return _decided


def _disable_for_host_networking() -> str:
    from testcontainers.core.config import testcontainers_config as config

    if not config.ryuk_disabled:
        config.ryuk_disabled = True
        _logger.info(
            "testcontainers' Ryuk reaper disabled: with host networking its container cannot "
            "run (it needs the bridge network); the testkit's own reaper removes the containers"
        )
    return "Ryuk disabled (host networking)"


def _decide(client: Any) -> str:
    from docker.errors import DockerException, ImageNotFound
    from testcontainers.core.config import testcontainers_config as config

    if config.ryuk_disabled:
        return "Ryuk disabled"
    if os.environ.get(ENV_RYUK_DISABLED) is not None:
        return "Ryuk enabled"  # asked for explicitly: testcontainers fails if it cannot start it
    image = config.ryuk_image
    try:
        client.images.get(image)
        return "Ryuk enabled"
    except ImageNotFound:
        pass
    except DockerException as exc:
        return f"Ryuk enabled (could not look for its image: {_first_line(exc)})"
    try:
        client.images.pull(image)
        return "Ryuk enabled (image pulled)"
    except DockerException as exc:
        reason = _first_line(exc)
    config.ryuk_disabled = True
    _logger.info(
        "testcontainers' Ryuk reaper disabled: its image %s is not present and cannot be "
        "pulled (%s); the testkit's own reaper removes the containers (set %s to decide)",
        image,
        reason,
        ENV_RYUK_DISABLED,
    )
    return f"Ryuk disabled: {image} cannot be pulled"


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0][:200] if lines else type(exc).__name__
