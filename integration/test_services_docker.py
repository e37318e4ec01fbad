"""The docker providers against a real daemon: round trips, restarts, the selection.

They are started here directly, whatever ``MICROBATCH_SERVICES`` says, so that the docker code
runs on any machine with Docker even when the suite runs with other providers. Each test runs
with host networking (containers on 127.0.0.1 ports) and with bridge networking (published
ports); a daemon without a bridge network (``dockerd --bridge=none``, as in CI) skips the
bridge runs. Without a daemon, or without the image, the tests skip; with
``MICROBATCH_SERVICES=docker MICROBATCH_REQUIRE_SERVICES=1`` they fail instead.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest
import sqlalchemy as sa
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from microbatch_testkit.services import (
    ENV_REQUIRE,
    ENV_SERVICES,
    DockerKafka,
    DockerPostgres,
    KafkaService,
    MachineProbe,
    require_services,
    select_provider,
    start_kafka,
    start_postgres,
)
from microbatch_testkit.services._docker_reaper import OWNER_LABEL, owner_token

pytestmark = pytest.mark.services

EXTERNAL = ("MICROBATCH_SERVICES", "MICROBATCH_KAFKA_BOOTSTRAP", "MICROBATCH_POSTGRES_URL")
DOCKER_PROBLEM = MachineProbe().docker_problem()


def _unavailable(reason: str) -> NoReturn:
    """Skip, or fail when this run requires the docker services."""
    if require_services() and os.environ.get(ENV_SERVICES, "").strip().lower() == "docker":
        pytest.fail(f"{reason} ({ENV_SERVICES}=docker {ENV_REQUIRE}=1)", pytrace=False)
    pytest.skip(reason)


def need_docker() -> None:
    """Skip (or fail, see :func:`_unavailable`) unless a Docker daemon answers."""
    if DOCKER_PROBLEM is not None:
        _unavailable(DOCKER_PROBLEM)


def docker_client() -> Any:
    import docker

    return docker.from_env(timeout=60)


def need_image(image: str) -> None:
    """Skip (or fail) when ``image`` is neither present nor pullable; a ``microbatch-local/``
    image is built on this machine only, so it is never pulled."""
    from docker.errors import DockerException, ImageNotFound

    from microbatch_testkit.services._docker_container import LOCAL_IMAGE_PREFIX

    client = docker_client()
    try:
        try:
            client.images.get(image)
            return
        except ImageNotFound:
            pass
        if image.startswith(LOCAL_IMAGE_PREFIX):
            _unavailable(
                f"the image {image} is not present: it is built locally, by "
                "`integration/docker/ci-docker.sh images`"
            )
        try:
            client.images.pull(image)
            return
        except DockerException as exc:
            reason = str(exc).strip().splitlines()[0][:200]
    finally:
        client.close()
    _unavailable(
        f"the image {image} is not present and cannot be pulled ({reason}); set "
        "MICROBATCH_KAFKA_IMAGE / MICROBATCH_POSTGRES_IMAGE to local images"
    )


def docker_environ(network: str) -> dict[str, str]:
    """This process's environment for the auto selection (no provider forced, no external
    service named) with ``network`` as the docker network mode."""
    env = {key: value for key, value in os.environ.items() if key not in EXTERNAL}
    env["MICROBATCH_DOCKER_NETWORK"] = network
    return env


@pytest.fixture(params=["host", "bridge"])
def network(request: pytest.FixtureRequest) -> str:
    """The network mode of this run; bridge skips on a daemon without a bridge network."""
    need_docker()
    if request.param == "bridge":
        from microbatch_testkit.services._docker_network import has_bridge_network

        client = docker_client()
        try:
            if not has_bridge_network(client):
                pytest.skip(
                    "the Docker daemon has no bridge network (dockerd --bridge=none): bridge "
                    "networking cannot run here"
                )
        finally:
            client.close()
    return str(request.param)


@pytest.fixture
def environ(network: str) -> Iterator[dict[str, str]]:
    """The auto selection's environment with this network mode."""
    yield docker_environ(network)


def _read(kafka: KafkaService, topic: str, expect: int) -> list[bytes]:
    consumer = Consumer(
        kafka.client_config(**{"group.id": uuid.uuid4().hex, "isolation.level": "read_committed"})
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(2)])
    values: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(values) < expect and time.monotonic() < deadline:
        for message in consumer.consume(num_messages=500, timeout=0.5):
            assert message.error() is None, message.error()
            values.append(message.value())
    consumer.close()
    return values


def _inspect(container_id: str | None) -> dict[str, object]:
    assert container_id is not None
    client = docker_client()
    try:
        return dict(client.api.inspect_container(container_id))
    finally:
        client.close()


def test_auto_selects_docker_and_kafka_round_trips_through_a_restart(
    environ: dict[str, str], network: str
) -> None:
    chosen = select_provider("kafka", environ=environ)
    assert (chosen.provider, chosen.reason) == ("docker", "a Docker daemon answers")
    need_image(DockerKafka(environ=environ).image)
    kafka = start_kafka(environ=environ)
    try:
        assert isinstance(kafka, DockerKafka)
        assert kafka.network == network
        assert kafka.bootstrap_servers.startswith("127.0.0.1:")
        info = _inspect(kafka.container_id)
        config: dict[str, dict[str, str]] = info["Config"]  # type: ignore[assignment]
        assert config["Labels"][OWNER_LABEL] == owner_token()
        host_config: dict[str, object] = info["HostConfig"]  # type: ignore[assignment]
        assert (host_config["NetworkMode"] == "host") == (network == "host")

        topic = kafka.create_topic(2)
        producer = Producer(kafka.client_config(**{"transactional.id": f"tx-{topic}"}))
        producer.init_transactions(60)
        producer.begin_transaction()
        for n in range(100):
            producer.produce(topic, key=str(n).encode(), value=str(n).encode())
        producer.commit_transaction(60)  # markers go through the BROKER listener
        producer.begin_transaction()
        producer.produce(topic, key=b"x", value=b"aborted")
        producer.abort_transaction(60)
        assert sorted(int(v) for v in _read(kafka, topic, 100)) == list(range(100))

        address = kafka.bootstrap_servers
        kafka.restart(graceful=False)  # killed: the data survives, the address stays
        assert kafka.running and kafka.bootstrap_servers == address
        assert sorted(int(v) for v in _read(kafka, topic, 100)) == list(range(100))
        producer.begin_transaction()  # the same producer carries on after the restart
        producer.produce(topic, key=b"100", value=b"100")
        producer.commit_transaction(60)
        assert sorted(int(v) for v in _read(kafka, topic, 101)) == list(range(101))
    finally:
        kafka.close()
    assert kafka.container_id is None


def test_auto_selects_docker_and_postgres_round_trips_through_restarts(
    environ: dict[str, str], network: str
) -> None:
    chosen = select_provider("postgres", environ=environ)
    assert (chosen.provider, chosen.reason) == ("docker", "a Docker daemon answers")
    need_image(DockerPostgres(environ=environ).image)
    postgres = start_postgres(environ=environ)
    try:
        assert isinstance(postgres, DockerPostgres)
        assert postgres.can_restart and postgres.running
        assert "127.0.0.1:" in postgres.url
        # a daemon on this machine: no password (trust), as with the local provider
        assert sa.engine.make_url(postgres.url).password is None
        info = _inspect(postgres.container_id)
        host_config: dict[str, object] = info["HostConfig"]  # type: ignore[assignment]
        assert (host_config["NetworkMode"] == "host") == (network == "host")

        database = postgres.create_database(hint="docker")
        engine = sa.create_engine(database.url, pool_pre_ping=True)
        try:
            with engine.begin() as connection:
                connection.execute(sa.text("CREATE TABLE t (n int)"))
                connection.execute(sa.text("INSERT INTO t VALUES (1), (2)"))
            postgres.restart(graceful=False)  # SIGKILL: recovery keeps every commit
            with engine.begin() as connection:
                connection.execute(sa.text("INSERT INTO t VALUES (3)"))
            with postgres.stopped():  # fast shutdown, then up again on the way out
                assert not postgres.running
                with pytest.raises(sa.exc.OperationalError):
                    sa.create_engine(database.url).connect().close()
            with engine.connect() as connection:
                assert connection.execute(sa.text("SELECT sum(n) FROM t")).scalar() == 6
        finally:
            engine.dispose()
        postgres.drop_database(database.name)
    finally:
        postgres.close()
    assert postgres.container_id is None


_OWNER_SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    from microbatch_testkit.services import DockerKafka, DockerPostgres
    from microbatch_testkit.services import _docker_reaper

    import docker

    postgres = DockerPostgres()
    postgres.start()
    kafka = DockerKafka()
    kafka.start()
    # a third one created and never started: the state between create and start
    _docker_reaper.track()
    client = docker.from_env()
    created = client.containers.create(
        postgres.image, command=["true"], network_mode="none",
        labels=_docker_reaper.owner_labels(),
    )
    assert created.status == "created"
    print(json.dumps({
        "containers": [postgres.container_id, kafka.container_id, created.id],
        "token": _docker_reaper.owner_token(),
        "watcher": _docker_reaper.watcher().pid,
    }), flush=True)
    time.sleep(600)
    """
)


def _default_network() -> str:
    from microbatch_testkit.services._docker_network import has_bridge_network

    client = docker_client()
    try:
        return "bridge" if has_bridge_network(client) else "host"
    finally:
        client.close()


def _first_line(process: subprocess.Popen[str], timeout: float) -> str:
    import select

    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], timeout)
    if not ready:
        return ""
    return process.stdout.readline()


def _ended(pid: int) -> bool:
    """True once ``pid`` is gone (or a zombie waiting for its new parent to reap it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError):
        return True


def test_a_killed_owner_leaves_no_container(tmp_path: Path) -> None:
    """SIGKILL the process that started a PostgreSQL and a Kafka container and created a
    third one without starting it: its watcher removes all three and exits. Ryuk is disabled
    in the owner, so the watcher alone can have removed them."""
    import json

    from microbatch_testkit.services._docker_reaper import reap

    need_docker()
    env = {key: value for key, value in os.environ.items() if key not in EXTERNAL}
    env.setdefault("MICROBATCH_DOCKER_NETWORK", _default_network())
    env["TESTCONTAINERS_RYUK_DISABLED"] = "true"
    need_image(DockerKafka(environ=env).image)
    need_image(DockerPostgres(environ=env).image)
    script = tmp_path / "owner.py"
    script.write_text(_OWNER_SCRIPT)
    log = (tmp_path / "owner.log").open("w")
    owner = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=log, text=True, env=env
    )
    started: dict[str, Any] = {}
    try:
        line = _first_line(owner, timeout=180)
        assert line, f"the owner printed nothing: {(tmp_path / 'owner.log').read_text()[-3000:]}"
        started = json.loads(line)
        client = docker_client()
        try:
            statuses = []
            for container_id in started["containers"]:
                container = client.containers.get(container_id)
                assert container.labels[OWNER_LABEL] == started["token"]
                statuses.append(container.status)
            assert statuses == ["running", "running", "created"]
            assert _ended(started["watcher"]) is False
            owner.send_signal(signal.SIGKILL)
            owner.wait(timeout=30)
            deadline = time.monotonic() + 60
            left = started["containers"]
            while left and time.monotonic() < deadline:
                time.sleep(0.2)
                left = [c for c in left if client.containers.list(all=True, filters={"id": c})]
            assert left == [], f"containers left 60 s after the owner was killed: {left}"
            labelled = client.containers.list(
                all=True, filters={"label": f"{OWNER_LABEL}={started['token']}"}
            )
            assert labelled == []
        finally:
            client.close()
        deadline = time.monotonic() + 15
        while not _ended(started["watcher"]) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _ended(started["watcher"]), "the watcher outlived its work"
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
        log.close()
        if started:
            reap(started["token"])


RYUK_NOWHERE = "127.0.0.1:9/none/ryuk:0"
"""A Ryuk image on a registry that cannot answer (loopback, the discard port): a real pull
attempt that fails at once without leaving this machine."""


def test_ryuk_runs_unless_its_image_cannot_be_had(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unset, TESTCONTAINERS_RYUK_DISABLED leaves the choice to the provider: Ryuk is disabled
    exactly when its image is neither present nor pullable; set, testcontainers' reading of it
    stands; with host networking Ryuk is always disabled."""
    from testcontainers.core.config import testcontainers_config as config

    from microbatch_testkit.services._docker_ryuk import ENV_RYUK_DISABLED, _decide, prepare_ryuk

    need_docker()
    present = DockerPostgres().image  # any image this daemon has, tagged as Ryuk's below
    need_image(present)
    client = docker_client()
    tag = "127.0.0.1:9/none/ryuk:present"
    try:
        monkeypatch.delenv(ENV_RYUK_DISABLED, raising=False)
        monkeypatch.setattr(config, "ryuk_image", RYUK_NOWHERE)
        monkeypatch.setattr(config, "_ryuk_disabled", False)
        # not present, and the pull (to 127.0.0.1:9) fails: disabled, saying why
        assert _decide(client) == f"Ryuk disabled: {RYUK_NOWHERE} cannot be pulled"
        assert config.ryuk_disabled

        # present on the daemon (a tag of a local image): Ryuk stays enabled, no pull
        client.images.get(present).tag(tag)
        monkeypatch.setattr(config, "ryuk_image", tag)
        monkeypatch.setattr(config, "_ryuk_disabled", False)
        assert _decide(client) == "Ryuk enabled" and not config.ryuk_disabled

        # asked for explicitly: no second guess, even though the image cannot be had
        monkeypatch.setenv(ENV_RYUK_DISABLED, "false")
        monkeypatch.setattr(config, "ryuk_image", RYUK_NOWHERE)
        monkeypatch.setattr(config, "_ryuk_disabled", None)  # testcontainers reads the variable
        assert _decide(client) == "Ryuk enabled" and not config.ryuk_disabled
        monkeypatch.setenv(ENV_RYUK_DISABLED, "true")
        monkeypatch.setattr(config, "_ryuk_disabled", None)
        assert _decide(client) == "Ryuk disabled" and config.ryuk_disabled

        # host networking: always disabled (Ryuk's container needs the bridge), even when
        # the variable asks for it and its image is present
        monkeypatch.setenv(ENV_RYUK_DISABLED, "false")
        monkeypatch.setattr(config, "ryuk_image", tag)
        monkeypatch.setattr(config, "_ryuk_disabled", None)
        assert prepare_ryuk(client, "host") == "Ryuk disabled (host networking)"
        assert config.ryuk_disabled
    finally:
        with contextlib.suppress(Exception):
            client.images.remove(tag)  # the tag only: the image keeps its own name
        client.close()


def test_bridge_networking_without_a_bridge_names_host_networking() -> None:
    """On a daemon without a bridge network (``dockerd --bridge=none``) the default bridge
    mode fails with a ConfigurationError naming MICROBATCH_DOCKER_NETWORK=host, before any
    container exists."""
    from microbatch import ConfigurationError
    from microbatch_testkit.services._docker_network import has_bridge_network

    need_docker()
    client = docker_client()
    try:
        if has_bridge_network(client):
            pytest.skip("this daemon has a bridge network")
    finally:
        client.close()
    env = docker_environ("bridge")
    postgres = DockerPostgres(environ=env)
    need_image(postgres.image)
    try:
        with pytest.raises(ConfigurationError, match="MICROBATCH_DOCKER_NETWORK=host"):
            postgres.start()
        assert postgres.container_id is None
    finally:
        postgres.close()


def test_postgres_that_is_not_the_containers_is_an_error(environ: dict[str, str]) -> None:
    """Readiness is the container's own server answering (its cluster_name), not any server
    on the port: a start that finds another name fails clearly."""
    postgres = DockerPostgres(environ=environ)
    need_image(postgres.image)
    postgres.start()
    try:
        postgres.stop()
        postgres._marker = "microbatch-someone-else"  # what another server would answer
        with pytest.raises(RuntimeError, match="is not this container's"):
            postgres.start()
    finally:
        postgres.close()


_OWNER_OUTLIVING_ITS_WATCHER = textwrap.dedent(
    """
    import json, sys
    from microbatch_testkit.services import DockerPostgres
    from microbatch_testkit.services import _docker_reaper

    postgres = DockerPostgres()
    postgres.start()
    print(json.dumps({
        "container": postgres.container_id,
        "token": _docker_reaper.owner_token(),
        "watcher": _docker_reaper.watcher().pid,
    }), flush=True)
    sys.stdin.readline()  # the watcher is killed meanwhile; then this process ends, no close()
    """
)


def test_an_owner_whose_watcher_was_killed_removes_its_containers_at_exit(
    tmp_path: Path,
) -> None:
    """SIGKILL the watcher, then let its owner end normally without closing its service: the
    owner's exit handler removes the container itself and warns about the watcher."""
    import json

    from microbatch_testkit.services._docker_reaper import reap

    need_docker()
    env = {key: value for key, value in os.environ.items() if key not in EXTERNAL}
    env.setdefault("MICROBATCH_DOCKER_NETWORK", _default_network())
    env["TESTCONTAINERS_RYUK_DISABLED"] = "true"
    need_image(DockerPostgres(environ=env).image)
    owner = subprocess.Popen(
        [sys.executable, "-c", _OWNER_OUTLIVING_ITS_WATCHER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    started: dict[str, Any] = {}
    try:
        line = _first_line(owner, timeout=120)
        assert line, "the owner printed nothing"
        started = json.loads(line)
        os.kill(started["watcher"], signal.SIGKILL)
        deadline = time.monotonic() + 10
        while not _ended(started["watcher"]) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _ended(started["watcher"])
        _, stderr = owner.communicate("go\n", timeout=90)
        assert owner.returncode == 0, stderr
        assert "watcher exited with code -9 before its owner ended" in stderr
        client = docker_client()
        try:
            assert client.containers.list(all=True, filters={"id": started["container"]}) == []
        finally:
            client.close()
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
        if started:
            reap(started["token"])


def test_a_missing_local_image_is_never_pulled(environ: dict[str, str]) -> None:
    """A ``microbatch-local/`` image can only be built on this machine: when it is missing the
    start fails at once with what builds it (a missing service: the fixtures skip, or fail
    with MICROBATCH_REQUIRE_SERVICES=1), without a pull."""
    from microbatch_testkit.services import ServiceUnavailable

    postgres = DockerPostgres(image="microbatch-local/postgres:no-such-tag", environ=environ)
    try:
        started = time.monotonic()
        with pytest.raises(ServiceUnavailable, match=r"integration/docker/ci-docker\.sh images"):
            postgres.start()
        assert time.monotonic() - started < 10
        assert postgres.container_id is None
    finally:
        postgres.close()
