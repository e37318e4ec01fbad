"""Start Kafka or PostgreSQL with the selected provider, and remember how long it took."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol, TypeVar

from ._kafka import KafkaService
from ._postgres import PostgresService
from ._selection import (
    ENV_KAFKA_BOOTSTRAP,
    ENV_POSTGRES_URL,
    Probe,
    Service,
    ServiceUnavailable,
    select_provider,
)

__all__ = ["STARTUPS", "Startup", "start_kafka", "start_postgres"]

_S = TypeVar("_S", KafkaService, PostgresService)


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

    def external(env: dict[str, str]) -> tuple[KafkaService, str]:
        from ._external import ExternalKafka

        return _checked(ExternalKafka(env[ENV_KAFKA_BOOTSTRAP].strip())), ""

    def docker(env: dict[str, str]) -> tuple[KafkaService, str]:
        from ._docker import DockerKafka

        service = _started(DockerKafka(environ=env))
        return service, service.note

    def local(env: dict[str, str]) -> tuple[KafkaService, str]:
        from ._kafka_local import LocalKafka

        service = _started(LocalKafka(environ=env))
        fetched = "downloaded" if service.jars_downloaded else "found cached"
        return service, f"jars {fetched} in {service.jar_seconds:.1f} s"

    return _start("kafka", environ, probe, external=external, docker=docker, local=local)


def start_postgres(
    *, environ: Mapping[str, str] | None = None, probe: Probe | None = None
) -> PostgresService:
    """A running PostgreSQL from the selected provider; :meth:`~PostgresService.close` it.

    Raises :class:`ServiceUnavailable` when no provider can serve, ``RuntimeError`` when the
    chosen one fails to start.
    """

    def external(env: dict[str, str]) -> tuple[PostgresService, str]:
        from ._external import ExternalPostgres

        return _checked(ExternalPostgres(env[ENV_POSTGRES_URL].strip())), ""

    def docker(env: dict[str, str]) -> tuple[PostgresService, str]:
        from ._docker import DockerPostgres

        service = _started(DockerPostgres(environ=env))
        return service, service.note

    def local(env: dict[str, str]) -> tuple[PostgresService, str]:
        from ._postgres_local import LocalPostgres

        return _started(LocalPostgres(environ=env)), ""

    return _start("postgres", environ, probe, external=external, docker=docker, local=local)


_Launch = Callable[[dict[str, str]], tuple[_S, str]]


def _start(
    kind: Service,
    environ: Mapping[str, str] | None,
    probe: Probe | None,
    *,
    external: _Launch[_S],
    docker: _Launch[_S],
    local: _Launch[_S],
) -> _S:
    """Select the provider of ``kind``, launch it (each launcher returns the running service
    and a note for the start-up line), and record the start-up in :data:`STARTUPS`."""
    env = dict(os.environ if environ is None else environ)
    selection = select_provider(kind, environ=env, probe=probe)
    if selection.provider is None:
        raise ServiceUnavailable(selection.reason)
    began = time.monotonic()
    if selection.provider == "external":
        service, note = external(env)
    elif selection.provider == "docker":
        service, note = docker(env)
    else:
        service, note = local(env)
    STARTUPS.append(
        Startup(
            kind,
            selection.provider,
            service.description,
            time.monotonic() - began,
            selection.reason,
            note,
        )
    )
    return service


class _Startable(Protocol):
    def start(self) -> None: ...

    def close(self) -> None: ...


_T = TypeVar("_T", bound=_Startable)


class _Checkable(Protocol):
    def check(self) -> None: ...


_C = TypeVar("_C", bound=_Checkable)


def _checked(service: _C) -> _C:
    """``service`` (one run by someone else) once :meth:`check` found it answering."""
    service.check()
    return service


def _started(service: _T) -> _T:
    """``service`` once started; on failure whatever it had started is closed, then re-raised."""
    try:
        service.start()
    except BaseException:
        service.close()
        raise
    return service
