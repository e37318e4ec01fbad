"""Which provider ``auto`` and the named modes pick, and what they say when none can serve."""

from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from microbatch import ConfigurationError
from microbatch_testkit import services
from microbatch_testkit.services import (
    MachineProbe,
    Selection,
    Service,
    ServiceUnavailable,
    fetch_kafka_jars,
    require_services,
    select_provider,
    start_kafka,
    start_postgres,
)

pytest_plugins = ["pytester"]

NO_DOCKER = "no Docker daemon answers at unix:///var/run/docker.sock (no such socket)"


@dataclass
class Machine:
    """A machine as the selection sees it; records what was asked."""

    docker: str | None = NO_DOCKER
    local: dict[str, list[str]] = field(default_factory=lambda: {"kafka": [], "postgres": []})
    missing: list[str] = field(default_factory=list)
    asked: list[str] = field(default_factory=list)

    def missing_packages(self, service: Service) -> list[str]:
        return self.missing

    def docker_problem(self) -> str | None:
        self.asked.append("docker")
        return self.docker

    def local_problems(self, service: Service) -> list[str]:
        self.asked.append(f"local {service}")
        return self.local[service]


def pick(service: Service, env: dict[str, str], machine: Machine) -> Selection:
    return select_provider(service, environ=env, probe=machine)


def test_public_names() -> None:
    assert sorted(services.__all__) == sorted(
        [
            *("BROKER_SETTINGS", "DEFAULT_KAFKA_VERSION", "MODES", "STARTUPS"),
            *("ENV_KAFKA_BOOTSTRAP", "ENV_POSTGRES_URL", "ENV_REQUIRE", "ENV_SERVICES"),
            *("KafkaService", "LocalKafka", "DockerKafka", "ExternalKafka"),
            *("PostgresService", "PostgresDatabase", "LocalPostgres", "DockerPostgres"),
            *("ExternalPostgres", "MachineProbe", "Probe", "Provider", "Selection", "Service"),
            *("ServiceUnavailable", "Startup", "cache_root", "fetch_kafka_jars"),
            *("require_services", "select_provider", "start_kafka", "start_postgres"),
        ]
    )
    assert services.MODES == ("auto", "docker", "local", "external")


# -- auto ---------------------------------------------------------------------------------


def test_auto_takes_external_when_the_variable_is_set_without_probing() -> None:
    machine = Machine(docker=None)
    chosen = pick("kafka", {"MICROBATCH_KAFKA_BOOTSTRAP": "broker:9092"}, machine)
    assert (chosen.provider, chosen.reason) == ("external", "MICROBATCH_KAFKA_BOOTSTRAP is set")
    assert machine.asked == []


def test_auto_decides_per_service() -> None:
    machine = Machine(docker=None)
    env = {"MICROBATCH_POSTGRES_URL": "postgresql://u@db/postgres"}
    assert pick("postgres", env, machine).provider == "external"
    assert pick("kafka", env, machine).provider == "docker"


def test_auto_prefers_docker_over_local() -> None:
    machine = Machine(docker=None)
    chosen = pick("postgres", {}, machine)
    assert (chosen.provider, chosen.reason) == ("docker", "a Docker daemon answers")
    assert machine.asked == ["docker"]


def test_auto_falls_back_to_local_and_says_why() -> None:
    chosen = pick("kafka", {"MICROBATCH_SERVICES": ""}, Machine())
    assert chosen.provider == "local"
    assert chosen.reason == f"no Docker ({NO_DOCKER}); this machine can run Kafka itself"


def test_auto_with_nothing_names_all_three_ways() -> None:
    machine = Machine(local={"kafka": ["Java 17 or newer (no java on PATH)"], "postgres": []})
    chosen = pick("kafka", {}, machine)
    assert not chosen.available and chosen.provider is None
    assert chosen.reason == (
        "no Kafka for the integration tests. Set up one of: "
        "(1) external: set MICROBATCH_KAFKA_BOOTSTRAP to the host:port of a running broker; "
        f"(2) docker: make a Docker daemon answer ({NO_DOCKER}); "
        "(3) local: install Java 17 or newer (no java on PATH). "
        "MICROBATCH_SERVICES=external|docker|local forces one"
    )


def test_missing_python_packages_come_first() -> None:
    machine = Machine(docker=None, missing=["psycopg", "sqlalchemy"])
    chosen = pick("postgres", {"MICROBATCH_SERVICES": "docker"}, machine)
    assert chosen.provider is None
    assert chosen.reason == (
        "the PostgreSQL fixtures need the Python packages psycopg, sqlalchemy: "
        "pip install 'microbatch-testkit[services]'"
    )


# -- named providers ----------------------------------------------------------------------


def test_a_named_provider_is_forced_over_the_variables() -> None:
    env = {"MICROBATCH_SERVICES": " LOCAL ", "MICROBATCH_KAFKA_BOOTSTRAP": "broker:9092"}
    machine = Machine(docker=None)
    assert pick("kafka", env, machine).provider == "local"
    assert machine.asked == ["local kafka"]


def test_named_docker_without_a_daemon() -> None:
    chosen = pick("postgres", {"MICROBATCH_SERVICES": "docker"}, Machine())
    assert chosen.provider is None
    assert chosen.reason == f"MICROBATCH_SERVICES=docker but {NO_DOCKER}"


def test_named_local_lists_what_is_missing() -> None:
    machine = Machine(local={"kafka": ["Java 17 or newer", "Maven (mvn on PATH)"], "postgres": []})
    chosen = pick("kafka", {"MICROBATCH_SERVICES": "local"}, machine)
    assert chosen.reason == (
        "MICROBATCH_SERVICES=local but the local Kafka provider needs Java 17 or newer; "
        "Maven (mvn on PATH)"
    )


def test_named_external_needs_its_variable() -> None:
    chosen = pick("postgres", {"MICROBATCH_SERVICES": "external"}, Machine(docker=None))
    assert chosen.provider is None
    assert chosen.reason.startswith(
        "MICROBATCH_SERVICES=external but MICROBATCH_POSTGRES_URL is not set: set it to the "
        "postgresql://"
    )


def test_an_unknown_mode_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match=r"'podman' is not a provider: use one of auto"):
        pick("kafka", {"MICROBATCH_SERVICES": "podman"}, Machine())


@pytest.mark.parametrize(
    ("value", "expected"),
    [("1", True), ("true", True), ("YES", True), ("0", False), ("", False), ("no", False)],
)
def test_require_services_reads_the_variable(value: str, expected: bool) -> None:
    assert require_services({"MICROBATCH_REQUIRE_SERVICES": value}) is expected


def test_start_functions_raise_service_unavailable() -> None:
    env = {"MICROBATCH_SERVICES": "external"}
    with pytest.raises(ServiceUnavailable, match="MICROBATCH_KAFKA_BOOTSTRAP is not set"):
        start_kafka(environ=env)
    with pytest.raises(ServiceUnavailable, match="MICROBATCH_POSTGRES_URL is not set"):
        start_postgres(environ=env)


# -- the real probe -----------------------------------------------------------------------


def test_probe_reports_a_silent_docker_socket_quickly(tmp_path: Path) -> None:
    socket_path = tmp_path / "docker.sock"
    began = time.monotonic()
    problem = MachineProbe({"DOCKER_HOST": f"unix://{socket_path}"}).docker_problem()
    assert problem == f"no Docker daemon answers at unix://{socket_path} (no such socket)"
    assert time.monotonic() - began < 5


def test_probe_names_what_the_local_providers_miss(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {"PATH": str(empty), "MICROBATCH_CACHE_DIR": str(tmp_path / "cache")}
    probe = MachineProbe({**env, "MICROBATCH_POSTGRES_BIN": str(empty)})
    assert probe.local_problems("kafka") == [
        "Java 17 or newer (no java on PATH and JAVA_HOME is not set)",
        f"Maven (mvn on PATH) to download the Kafka {services.DEFAULT_KAFKA_VERSION} broker "
        "once, or MICROBATCH_KAFKA_HOME naming an unpacked Kafka distribution",
    ]
    (problem,) = probe.local_problems("postgres")
    assert problem.startswith("the PostgreSQL server binaries initdb and postgres (not in ")


def test_probe_rejects_an_old_java(tmp_path: Path) -> None:
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("#!/bin/sh\necho 'openjdk version \"11.0.22\" 2024-01-16' >&2\n")
    java.chmod(java.stat().st_mode | stat.S_IEXEC)
    env = {"JAVA_HOME": str(tmp_path / "jdk"), "PATH": os.environ["PATH"]}
    (problem, *_) = MachineProbe(env).local_problems("kafka")
    assert problem == f"Java 17 or newer ({java} is Java 11; set JAVA_HOME to a newer one)"


def test_fetching_jars_without_maven_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(RuntimeError, match=r"Maven \(mvn\) is not on PATH to download them"):
        fetch_kafka_jars("4.4.0", {"MICROBATCH_CACHE_DIR": str(tmp_path / "cache")})
    assert not list((tmp_path / "cache").glob("kafka-4.4.0*/"))


# -- the fixtures -------------------------------------------------------------------------

USES_BOTH = """
def test_kafka(kafka_service):
    pass

def test_postgres(postgres_database):
    pass
"""


@pytest.fixture
def external_unset(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """The external provider chosen with neither of its addresses set."""
    monkeypatch.setenv("MICROBATCH_SERVICES", "external")
    monkeypatch.delenv("MICROBATCH_KAFKA_BOOTSTRAP", raising=False)
    monkeypatch.delenv("MICROBATCH_POSTGRES_URL", raising=False)
    return monkeypatch


def test_fixtures_skip_with_the_reason(
    pytester: pytest.Pytester, external_unset: pytest.MonkeyPatch
) -> None:
    external_unset.delenv("MICROBATCH_REQUIRE_SERVICES", raising=False)
    pytester.makepyfile(test_uses_both=USES_BOTH)
    result = pytester.runpytest("-p", "no:cacheprovider", "-rs")
    result.assert_outcomes(skipped=2)
    result.stdout.fnmatch_lines(
        [
            "*MICROBATCH_SERVICES=external but MICROBATCH_KAFKA_BOOTSTRAP is not set*",
            "*MICROBATCH_SERVICES=external but MICROBATCH_POSTGRES_URL is not set*",
        ]
    )


def test_required_services_turn_the_skip_into_a_failure(
    pytester: pytest.Pytester, external_unset: pytest.MonkeyPatch
) -> None:
    external_unset.setenv("MICROBATCH_REQUIRE_SERVICES", "1")
    pytester.makepyfile(test_uses_both=USES_BOTH)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(
        ["*MICROBATCH_KAFKA_BOOTSTRAP is not set*MICROBATCH_REQUIRE_SERVICES=1 makes a missing*"]
    )


def test_an_unknown_mode_errors_even_without_require(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MICROBATCH_SERVICES", "kubernetes")
    monkeypatch.delenv("MICROBATCH_REQUIRE_SERVICES", raising=False)
    pytester.makepyfile(test_uses_both=USES_BOTH)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["*MICROBATCH_SERVICES='kubernetes' is not a provider*"])


def test_the_summary_lists_only_this_sessions_services(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    from microbatch_testkit.services import _start

    earlier = services.Startup("kafka", "local", "a broker of the outer run", 4.0, "reason")
    monkeypatch.setattr(_start, "STARTUPS", [earlier])
    pytester.makepyfile(
        test_starts="""
        from microbatch_testkit.services import Startup, _start

        def test_starts_one():
            _start.STARTUPS.append(
                Startup("postgres", "external", "PostgreSQL 17 (external)", 0.25, "why", "n")
            )
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*- microbatch test services -*",
            "postgres: PostgreSQL 17 (external), up in 0.2 s; n [external provider: why]",
        ]
    )
    result.stdout.no_fnmatch_line("*outer run*")
