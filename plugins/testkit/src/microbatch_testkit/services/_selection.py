"""Which provider serves Kafka or PostgreSQL in this run, and why (``MICROBATCH_SERVICES``).

``auto`` (the default) takes, for each service on its own: ``external`` when its variable is
set (``MICROBATCH_KAFKA_BOOTSTRAP`` / ``MICROBATCH_POSTGRES_URL``), else ``docker`` when a
daemon answers, else ``local`` when this machine has what the local provider needs. Naming a
provider forces it. When none can serve, the selection says what to set up for each of the
three; the fixtures skip with that message, or fail under ``MICROBATCH_REQUIRE_SERVICES=1``.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, Protocol

from microbatch import ConfigurationError

__all__ = [
    "ENV_KAFKA_BOOTSTRAP",
    "ENV_POSTGRES_URL",
    "ENV_REQUIRE",
    "ENV_SERVICES",
    "MODES",
    "MachineProbe",
    "Probe",
    "Provider",
    "Selection",
    "Service",
    "ServiceUnavailable",
    "require_services",
    "select_provider",
]

ENV_SERVICES = "MICROBATCH_SERVICES"
ENV_REQUIRE = "MICROBATCH_REQUIRE_SERVICES"
ENV_KAFKA_BOOTSTRAP = "MICROBATCH_KAFKA_BOOTSTRAP"
ENV_POSTGRES_URL = "MICROBATCH_POSTGRES_URL"
MODES = ("auto", "docker", "local", "external")

Service = Literal["kafka", "postgres"]
Provider = Literal["docker", "local", "external"]

_LABEL: dict[str, str] = {"kafka": "Kafka", "postgres": "PostgreSQL"}
_VARIABLE: dict[str, str] = {"kafka": ENV_KAFKA_BOOTSTRAP, "postgres": ENV_POSTGRES_URL}
_EXAMPLE: dict[str, str] = {
    "kafka": "host:port of a running broker",
    "postgres": "postgresql://user:password@host:port/postgres of a server where user may "
    "create databases",
}
_PACKAGES: dict[str, tuple[tuple[str, str], ...]] = {
    "kafka": (("confluent_kafka", "confluent-kafka"),),
    "postgres": (("psycopg", "psycopg"), ("sqlalchemy", "sqlalchemy")),
}


class ServiceUnavailable(Exception):
    """No provider can serve the service in this run; the message says what to set up."""


class Probe(Protocol):
    """What the machine offers; :class:`MachineProbe` asks the real one."""

    def missing_packages(self, service: Service) -> list[str]:
        """Python distributions the service's fixtures need and cannot import."""
        ...

    def docker_problem(self) -> str | None:
        """Why Docker cannot be used, or None when a daemon answers."""
        ...

    def local_problems(self, service: Service) -> list[str]:
        """What the local provider of ``service`` is missing (empty when nothing)."""
        ...


class MachineProbe:
    """The real :class:`Probe`: imports, a Docker ping, Java, Maven and PostgreSQL binaries.

    Each answer is computed once.
    """

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self._environ = dict(os.environ if environ is None else environ)
        self._docker: tuple[str | None] | None = None
        self._local: dict[str, list[str]] = {}

    def missing_packages(self, service: Service) -> list[str]:
        return [
            distribution
            for module, distribution in _PACKAGES[service]
            if importlib.util.find_spec(module) is None
        ]

    def docker_problem(self) -> str | None:
        if self._docker is None:
            from ._docker import docker_problem

            self._docker = (docker_problem(self._environ),)
        return self._docker[0]

    def local_problems(self, service: Service) -> list[str]:
        if service not in self._local:
            self._local[service] = (
                self._kafka_problems() if service == "kafka" else self._postgres_problems()
            )
        return self._local[service]

    def _kafka_problems(self) -> list[str]:
        import shutil

        from ._kafka_local import DEFAULT_KAFKA_VERSION, cached_kafka_jars, java_problem

        problems = []
        java = java_problem(self._environ)
        if java is not None:
            problems.append(java)
        version = self._environ.get("MICROBATCH_KAFKA_VERSION") or DEFAULT_KAFKA_VERSION
        if cached_kafka_jars(version, self._environ) is None and (
            shutil.which("mvn", path=self._environ.get("PATH")) is None
        ):
            problems.append(
                f"Maven (mvn on PATH) to download the Kafka {version} broker once, or "
                "MICROBATCH_KAFKA_HOME naming an unpacked Kafka distribution"
            )
        return problems

    def _postgres_problems(self) -> list[str]:
        from ._postgres_local import postgres_problem

        problem = postgres_problem(self._environ)
        return [] if problem is None else [problem]


@dataclass(frozen=True)
class Selection:
    """The provider chosen for a service (None when none can serve) and the reason."""

    service: Service
    provider: Provider | None
    reason: str

    @property
    def available(self) -> bool:
        """True when a provider was chosen."""
        return self.provider is not None


def require_services(environ: Mapping[str, str] | None = None) -> bool:
    """True when ``MICROBATCH_REQUIRE_SERVICES`` asks for a failure instead of a skip."""
    env = os.environ if environ is None else environ
    return env.get(ENV_REQUIRE, "").strip().lower() in ("1", "true", "yes", "on")


def _mode(env: Mapping[str, str]) -> str:
    mode = env.get(ENV_SERVICES, "").strip().lower() or "auto"
    if mode not in MODES:
        raise ConfigurationError(
            f"{ENV_SERVICES}={env.get(ENV_SERVICES)!r} is not a provider: use one of "
            f"{', '.join(MODES)} (auto is the default)"
        )
    return mode


def select_provider(
    service: Service,
    *,
    environ: Mapping[str, str] | None = None,
    probe: Probe | None = None,
) -> Selection:
    """Choose the provider of ``service`` for this run (see the module docstring).

    Raises ``ConfigurationError`` when ``MICROBATCH_SERVICES`` holds an unknown value.
    """
    env = os.environ if environ is None else environ
    machine = probe if probe is not None else MachineProbe(env)
    mode = _mode(env)
    label, variable = _LABEL[service], _VARIABLE[service]

    def none(reason: str) -> Selection:
        return Selection(service, None, reason)

    missing = machine.missing_packages(service)
    if missing:
        return none(
            f"the {label} fixtures need the Python packages {', '.join(missing)}: "
            "pip install 'microbatch-testkit[services]'"
        )
    configured = env.get(variable, "").strip()

    if mode == "external":
        if configured:
            return Selection(service, "external", f"{ENV_SERVICES}=external and {variable} is set")
        return none(
            f"{ENV_SERVICES}=external but {variable} is not set: set it to the {_EXAMPLE[service]}"
        )
    if mode == "docker":
        problem = machine.docker_problem()
        if problem is None:
            return Selection(service, "docker", f"{ENV_SERVICES}=docker and a daemon answers")
        return none(f"{ENV_SERVICES}=docker but {problem}")
    if mode == "local":
        problems = machine.local_problems(service)
        if not problems:
            return Selection(service, "local", f"{ENV_SERVICES}=local")
        return none(
            f"{ENV_SERVICES}=local but the local {label} provider needs {'; '.join(problems)}"
        )

    if configured:
        return Selection(service, "external", f"{variable} is set")
    docker = machine.docker_problem()
    if docker is None:
        return Selection(service, "docker", "a Docker daemon answers")
    local = machine.local_problems(service)
    if not local:
        return Selection(
            service, "local", f"no Docker ({docker}); this machine can run {label} itself"
        )
    return none(
        f"no {label} for the integration tests. Set up one of: "
        f"(1) external: set {variable} to the {_EXAMPLE[service]}; "
        f"(2) docker: make a Docker daemon answer ({docker}); "
        f"(3) local: install {'; '.join(local)}. "
        f"{ENV_SERVICES}=external|docker|local forces one"
    )
