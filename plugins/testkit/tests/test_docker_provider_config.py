"""The docker provider without a daemon: the network variable, what each mode configures, the
``services`` marker, and the reaper's watcher process coming and going."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from microbatch import ConfigurationError
from microbatch_testkit.services import DockerKafka, DockerPostgres, _docker_reaper
from microbatch_testkit.services._docker_network import (
    ENV_DOCKER_NETWORK,
    KafkaPorts,
    docker_host_address,
    docker_network,
    kafka_environment,
    postgres_command,
)
from microbatch_testkit.services._kafka import BROKER_SETTINGS

pytest_plugins = ["pytester"]


# -- MICROBATCH_DOCKER_NETWORK ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "mode"),
    [(None, "bridge"), ("", "bridge"), (" bridge ", "bridge"), ("host", "host"), ("HOST", "host")],
)
def test_network_mode_from_the_variable(value: str | None, mode: str) -> None:
    env = {} if value is None else {ENV_DOCKER_NETWORK: value}
    assert docker_network(env) == mode


@pytest.mark.parametrize("value", ["overlay", "none", "hostt", "127.0.0.1"])
def test_an_unknown_network_mode_names_the_variable_and_its_values(value: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        docker_network({ENV_DOCKER_NETWORK: value})
    message = str(raised.value)
    assert f"{ENV_DOCKER_NETWORK}={value!r}" in message
    assert "bridge" in message and "host" in message


def test_the_providers_read_the_network_mode_when_made() -> None:
    assert DockerKafka(environ={ENV_DOCKER_NETWORK: "host"}).network == "host"
    assert DockerPostgres(environ={}).network == "bridge"
    with pytest.raises(ConfigurationError, match=ENV_DOCKER_NETWORK):
        DockerPostgres(environ={ENV_DOCKER_NETWORK: "macvlan"})


# -- what each mode configures ----------------------------------------------------------------


def _listeners(value: str) -> dict[str, str]:
    return dict(item.split("://", 1) for item in value.split(","))


def test_kafka_in_host_mode_listens_and_advertises_on_loopback_ports_only() -> None:
    env = kafka_environment(
        "host",
        host="127.0.0.1",
        ports=KafkaPorts(41001, 41002, 41003),
        heap="-Xmx300m",
        cluster_id="abc",
        jvm="-XX:TieredStopAtLevel=4",
    )
    assert _listeners(env["KAFKA_LISTENERS"]) == {
        "PLAINTEXT": "127.0.0.1:41001",
        "BROKER": "127.0.0.1:41002",
        "CONTROLLER": "127.0.0.1:41003",
    }
    assert _listeners(env["KAFKA_ADVERTISED_LISTENERS"]) == {
        "PLAINTEXT": "127.0.0.1:41001",
        "BROKER": "127.0.0.1:41002",
    }
    assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"] == "1@127.0.0.1:41003"
    assert env["KAFKA_INTER_BROKER_LISTENER_NAME"] == "BROKER"
    assert not any("0.0.0.0" in value or "localhost" in value for value in env.values())
    assert (env["KAFKA_HEAP_OPTS"], env["CLUSTER_ID"]) == ("-Xmx300m", "abc")
    # the extra JVM options come last and win over the defaults
    assert env["KAFKA_JVM_PERFORMANCE_OPTS"].endswith("-XX:TieredStopAtLevel=4")
    assert "-XX:TieredStopAtLevel=1" in env["KAFKA_JVM_PERFORMANCE_OPTS"]


def test_kafka_in_bridge_mode_advertises_the_published_port_of_the_docker_host() -> None:
    env = kafka_environment(
        "bridge", host="10.1.2.3", ports=KafkaPorts(41001), heap="-Xmx300m", cluster_id="abc"
    )
    assert _listeners(env["KAFKA_LISTENERS"]) == {
        "PLAINTEXT": "0.0.0.0:9092",  # inside the container; 9092 is published on 41001
        "BROKER": "0.0.0.0:19092",
        "CONTROLLER": "0.0.0.0:9093",
    }
    assert _listeners(env["KAFKA_ADVERTISED_LISTENERS"]) == {
        "PLAINTEXT": "10.1.2.3:41001",
        "BROKER": "localhost:19092",
    }
    assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"] == "1@localhost:9093"


@pytest.mark.parametrize("mode", ["bridge", "host"])
def test_kafka_gets_the_brokers_test_settings(mode: str) -> None:
    env = kafka_environment(
        mode,  # type: ignore[arg-type]
        host="127.0.0.1",
        ports=KafkaPorts(1, 2, 3),
        heap="",
        cluster_id="c",
    )
    for key, value in BROKER_SETTINGS.items():
        assert env["KAFKA_" + key.upper().replace(".", "_")] == value


def test_postgres_command_per_mode() -> None:
    assert postgres_command("host", 41005) == [
        *("postgres", "-c", "port=41005", "-c", "listen_addresses=127.0.0.1"),
        *("-c", "fsync=off", "-c", "max_connections=200"),
    ]
    # bridge: the image's own port (5432) and addresses, published by Docker
    assert postgres_command("bridge", 41005) == [
        *("postgres", "-c", "fsync=off", "-c", "max_connections=200"),
    ]


@pytest.mark.parametrize(
    ("base_url", "override", "address"),
    [
        ("http+docker://localhost", None, ("127.0.0.1", True)),
        ("http+docker://localnpipe", None, ("127.0.0.1", True)),
        ("http://127.0.0.1:2375", None, ("127.0.0.1", True)),
        ("http://docker.example:2375", None, ("docker.example", False)),
        ("https://10.0.0.7:2376", None, ("10.0.0.7", False)),
        ("http+docker://localhost", "10.0.0.9", ("10.0.0.9", False)),
        ("http://10.0.0.7:2375", "localhost", ("127.0.0.1", True)),
    ],
)
def test_the_docker_host_address(
    base_url: str, override: str | None, address: tuple[str, bool]
) -> None:
    assert docker_host_address(base_url, override) == address


# -- the services marker ------------------------------------------------------------------------


def test_tests_using_a_service_fixture_get_the_services_marker(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_marked="""
        import pytest

        @pytest.fixture
        def table(postgres_database):  # postgres_service through another fixture
            return postgres_database

        def test_plain():
            pass

        def test_kafka(kafka_service):
            pass

        def test_topic(make_kafka_topic):
            pass

        def test_indirect(table):
            pass

        @pytest.mark.services
        def test_explicit():
            pass
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "--collect-only", "-q", "-m", "services")
    selected = sorted(line.split("::")[1] for line in result.outlines if "::" in line)
    assert selected == ["test_explicit", "test_indirect", "test_kafka", "test_topic"]
    result = pytester.runpytest("-p", "no:cacheprovider", "--markers")
    assert any(line.startswith("@pytest.mark.services:") for line in result.outlines)


# -- the reaper's watcher -----------------------------------------------------------------------


def test_every_container_of_this_process_carries_its_token() -> None:
    labels = _docker_reaper.owner_labels()
    assert labels == {"org.microbatch.testkit.owner": _docker_reaper.owner_token()}
    assert len(_docker_reaper.owner_token()) == 32


_WATCHER_SCRIPT = """
import sys
from microbatch_testkit.services import _docker_reaper as reaper

assert reaper.watcher() is None
reaper.track()
first = reaper.watcher()
assert first is not None and first.poll() is None
reaper.track()  # a second container: the same watcher
assert reaper.watcher() is first
reaper.release()
assert first.poll() is None  # one container left
reaper.release()
assert reaper.watcher() is None
assert first.returncode == 0  # waited for: no zombie
reaper.track()  # a new watcher, left to the exit of this process
print(first.pid, reaper.watcher().pid, flush=True)
"""


def _gone(pid: int) -> bool:
    return not Path(f"/proc/{pid}").exists()


def test_the_watcher_ends_with_the_last_container_or_its_owner(tmp_path: Path) -> None:
    """In a process of its own, without a daemon (a socket that does not exist): the watcher
    comes with the first container, goes with the last one or with its owner, is reaped, and
    prints nothing."""
    env = {**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/no-docker.sock"}
    done = subprocess.run(
        [sys.executable, "-c", _WATCHER_SCRIPT],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    first, second = (int(pid) for pid in done.stdout.split())
    assert _gone(first) and _gone(second)  # both waited for by their owner
