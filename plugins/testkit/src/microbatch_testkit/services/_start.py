"""Start Kafka or PostgreSQL with the selected provider, and remember how long it took."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ._kafka import KafkaService
from ._postgres import PostgresService
from ._selection import (
    ENV_KAFKA_BOOTSTRAP,
    ENV_POSTGRES_URL,
    Probe,
    ServiceUnavailable,
    select_provider,
)

__all__ = ["STARTUPS", "Startup", "start_kafka", "start_postgres"]


@dataclass(frozen=True)
class Startup:
    """How one service came up: provider, description, seconds, and why that provider."""

    service: str
    provider: str
    description: str
    seconds: float
    reason: str
    note: str = ""


STARTUPS: list[Startup] = []
"""Every service started in this process, in order (the pytest plugin prints them)."""


def start_kafka(
    *, environ: Mapping[str, str] | None = None, probe: Probe | None = None
) -> KafkaService:
    """A running Kafka from the selected provider; :meth:`~KafkaService.close` it when done.

    Raises :class:`ServiceUnavailable` when no provider can serve, ``RuntimeError`` when the
    chosen one fails to start (with the broker's log).
    """
    env = dict(os.environ if environ is None else environ)
    selection = select_provider("kafka", environ=env, probe=probe)
    if selection.provider is None:
        raise ServiceUnavailable(selection.reason)
    began = time.monotonic()
    note = ""
    service: KafkaService
    if selection.provider == "external":
        from ._external import ExternalKafka

        external = ExternalKafka(env[ENV_KAFKA_BOOTSTRAP].strip())
        external.check()
        service = external
    elif selection.provider == "docker":
        from ._docker import DockerKafka

        docker = DockerKafka(environ=env)
        _start_or_close(docker.start, docker.close)
        service = docker
    else:
        from ._kafka_local import LocalKafka

        local = LocalKafka(environ=env)
        _start_or_close(local.start, local.close)
        fetched = "downloaded" if local.jars_downloaded else "found cached"
        note = f"jars {fetched} in {local.jar_seconds:.1f} s"
        service = local
    STARTUPS.append(
        Startup(
            "kafka",
            selection.provider,
            service.description,
            time.monotonic() - began,
            selection.reason,
            note,
        )
    )
    return service


def start_postgres(
    *, environ: Mapping[str, str] | None = None, probe: Probe | None = None
) -> PostgresService:
    """A running PostgreSQL from the selected provider; :meth:`~PostgresService.close` it.

    Raises :class:`ServiceUnavailable` when no provider can serve, ``RuntimeError`` when the
    chosen one fails to start.
    """
    env = dict(os.environ if environ is None else environ)
    selection = select_provider("postgres", environ=env, probe=probe)
    if selection.provider is None:
        raise ServiceUnavailable(selection.reason)
    began = time.monotonic()
    service: PostgresService
    if selection.provider == "external":
        from ._external import ExternalPostgres

        external = ExternalPostgres(env[ENV_POSTGRES_URL].strip())
        external.check()
        service = external
    elif selection.provider == "docker":
        from ._docker import DockerPostgres

        docker = DockerPostgres(environ=env)
        _start_or_close(docker.start, docker.close)
        service = docker
    else:
        from ._postgres_local import LocalPostgres

        local = LocalPostgres(environ=env)
        _start_or_close(local.start, local.close)
        service = local
    STARTUPS.append(
        Startup(
            "postgres",
            selection.provider,
            service.description,
            time.monotonic() - began,
            selection.reason,
        )
    )
    return service


def _start_or_close(start: Callable[[], None], close: Callable[[], None]) -> None:
    """Call ``start``; on failure ``close`` whatever it had started, then re-raise."""
    try:
        start()
    except BaseException:
        close()
        raise
