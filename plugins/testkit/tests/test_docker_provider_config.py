"""The docker provider without a daemon: the network variable, what each mode configures, the
``services`` marker, and the reaper's watcher process coming and going."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from microbatch import ConfigurationError
from microbatch_testkit.services import DockerKafka, DockerPostgres
from microbatch_testkit.services._docker_network import (
    ENV_DOCKER_NETWORK,
    KafkaPorts,
    daemon_url,
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
    # the server's name, by which the provider knows the answering server is its container's
    assert postgres_command("host", 41005, cluster_name="microbatch-ab12")[-2:] == [
        *("-c", "cluster_name=microbatch-ab12"),
    ]


@pytest.mark.parametrize(
    ("base_url", "ssh_host", "daemon"),
    [
        ("http+docker://localhost", None, "unix://"),  # what docker-py makes of unix://
        ("http+docker://localnpipe", None, "npipe://"),
        ("http+docker://ssh", "me@docker.example:2222", "ssh://me@docker.example:2222"),
        ("http://127.0.0.1:2375", None, "tcp://127.0.0.1:2375"),
        ("https://10.0.0.7:2376", None, "tcp://10.0.0.7:2376"),
    ],
)
def test_the_daemon_address_from_docker_pys_base_url(
    base_url: str, ssh_host: str | None, daemon: str
) -> None:
    assert daemon_url(base_url, ssh_host) == daemon


@pytest.mark.parametrize(
    ("daemon", "override", "address"),
    [
        ("unix:///var/run/docker.sock", None, ("127.0.0.1", True)),
        ("unix://", None, ("127.0.0.1", True)),
        ("npipe:////./pipe/docker_engine", None, ("127.0.0.1", True)),
        ("tcp://127.0.0.1:2375", None, ("127.0.0.1", True)),
        ("tcp://localhost:2375", None, ("127.0.0.1", True)),
        ("tcp://[::1]:2375", None, ("127.0.0.1", True)),
        ("tcp://docker.example:2375", None, ("docker.example", False)),
        ("tcp://10.0.0.7:2376", None, ("10.0.0.7", False)),
        # over SSH the daemon is another machine's, whatever the name: a password, no host mode
        ("ssh://me@docker.example:2222", None, ("docker.example", False)),
        ("ssh://docker.example", None, ("docker.example", False)),
        ("ssh://me@localhost", None, ("127.0.0.1", False)),
        ("unix:///var/run/docker.sock", "10.0.0.9", ("10.0.0.9", False)),
        ("ssh://me@docker.example", "localhost", ("127.0.0.1", True)),
        ("tcp://10.0.0.7:2375", "localhost", ("127.0.0.1", True)),
    ],
)
def test_the_docker_host_address(
    daemon: str, override: str | None, address: tuple[str, bool]
) -> None:
    assert docker_host_address(daemon, override) == address


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
reaper.release()  # the last one: the watcher is told nothing is left and exits at once
assert reaper.watcher() is None
assert first.returncode == 0  # waited for: no zombie
reaper.REAP_PATIENCE = 0.5  # no daemon answers here: the watcher gives up soon
reaper.track()  # a new watcher, left to the exit of this process
print(first.pid, reaper.watcher().pid, flush=True)
"""


def _gone(pid: int) -> bool:
    return not Path(f"/proc/{pid}").exists()


def _no_daemon(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/no-docker.sock"}


def _run(script: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def test_the_watcher_ends_with_the_last_container_or_its_owner(tmp_path: Path) -> None:
    """In a process of its own, without a daemon (a socket that does not exist): the watcher
    comes with the first container, goes with the last one or with its owner, is reaped; one
    that could not reap (no daemon) is reported."""
    done = _run(_WATCHER_SCRIPT, _no_daemon(tmp_path))
    assert done.returncode == 0, done.stderr
    # the second watcher found no daemon to reap with: its non-zero exit is a warning
    assert done.stderr.strip() == "the testkit's container watcher exited with code 1"
    first, second = (int(pid) for pid in done.stdout.split())
    assert _gone(first) and _gone(second)  # both waited for by their owner


def test_a_watcher_that_cannot_come_up_is_an_error(tmp_path: Path) -> None:
    """The watcher imports ``docker`` before it says it is ready: without the package (here
    shadowed by one that fails to import) ``track`` fails at once, with the exit code."""
    broken = tmp_path / "shadow" / "docker"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise ImportError('no docker here')\n")
    script = """
from microbatch_testkit.services import _docker_reaper as reaper
try:
    reaper.track()
except RuntimeError as exc:
    print(exc)
print(reaper.watcher(), reaper._tracked)
"""
    env = {**_no_daemon(tmp_path), "PYTHONPATH": str(broken.parent)}
    done = _run(script, env)
    assert done.returncode == 0, done.stderr
    message, state = done.stdout.strip().splitlines()
    assert message.startswith("the testkit's container watcher did not come up (exit code 1)")
    assert "no container was started" in message
    assert state == "None 0"  # nothing counted, nothing left running


_FORK_SCRIPT = """
import os, sys, threading, time
from microbatch_testkit.services import _docker_reaper as reaper

reaper.REAP_PATIENCE = 0.5  # no daemon answers here: the watcher gives up soon
reaper.track()
parent_token, watcher = reaper.owner_token(), reaper.watcher()
# a fork waits while another thread is inside the reaper's lock
held = threading.Event()
def hold():
    with reaper._lock:
        held.set()
        time.sleep(0.5)
threading.Thread(target=hold).start()
held.wait()
started = time.monotonic()
child = os.fork()
if child == 0:
    ok = reaper.owner_token() != parent_token and reaper.watcher() is None
    ok = ok and reaper._tracked == 0 and reaper._lock.acquire(timeout=1)
    os.write(1, f"child {ok}\\n".encode())  # one write each: the two processes share the pipe
    time.sleep(8)  # outlives the parent
    os._exit(0)
waited = time.monotonic() - started >= 0.4
os.write(1, f"waited {waited}\\nwatcher {watcher.pid} {child}\\n".encode())
os._exit(0)  # ends without its atexit handler: only the pipe's closing tells the watcher
"""


def test_a_forked_child_owns_nothing_and_the_parents_watcher_still_ends(tmp_path: Path) -> None:
    """After a fork the child has a token of its own and no watcher, and it holds no copy of
    the parent's pipe: the parent's watcher ends when the parent does, the child still alive."""
    env = _no_daemon(tmp_path)
    env["PYTHONUNBUFFERED"] = "1"
    process = subprocess.Popen(
        [sys.executable, "-c", _FORK_SCRIPT], stdout=subprocess.PIPE, text=True, env=env
    )
    out, _ = process.communicate(timeout=30)
    lines = dict(line.split(" ", 1) for line in out.strip().splitlines())
    assert lines["child"] == "True" and lines["waited"] == "True", out
    watcher, child = (int(pid) for pid in lines["watcher"].split())
    deadline = time.monotonic() + 5
    while not _gone(watcher) and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        # the watcher saw its owner end (then failed to reach the absent daemon and exited)
        assert _gone(watcher) or _zombie(watcher), "the watcher waits on a pipe the child holds"
        assert not _gone(child), "the child should still be running"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True
