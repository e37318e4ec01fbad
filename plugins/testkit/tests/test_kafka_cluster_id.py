"""The local Kafka's cluster id is never read as an option by ``kafka-storage format``."""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path

import pytest

from microbatch_testkit.services import _kafka_local
from microbatch_testkit.services._process import free_port

# One id in 64 starts with "-" when nothing prevents it: 4,000 draws meet one with a
# probability of 1 - (63/64)**4000 (a miss is less likely than 1 in 10**27).
DRAWS = 4000


def test_cluster_ids_are_valid_and_never_start_with_a_dash() -> None:
    ids = [_kafka_local._cluster_id() for _ in range(DRAWS)]
    assert [i for i in ids if i.startswith("-")] == []
    for cluster_id in ids:
        assert len(cluster_id) == 22
        assert "=" not in cluster_id
        assert len(base64.urlsafe_b64decode(cluster_id + "==")) == 16
    assert len(set(ids)) == DRAWS


def test_format_command_attaches_the_id_to_its_option(tmp_path: Path) -> None:
    command = _kafka_local._storage_format_command(
        ["java"], "-Owps8Y1RD6Oi7nYe5xz_w", tmp_path / "server.properties"
    )
    assert "--cluster-id=-Owps8Y1RD6Oi7nYe5xz_w" in command
    assert "-Owps8Y1RD6Oi7nYe5xz_w" not in command


def test_real_storage_format_accepts_an_id_starting_with_a_dash(tmp_path: Path) -> None:
    """The real ``kafka-storage format``, from cached jars only (never downloads)."""
    problem = _kafka_local.java_problem()
    libs = _kafka_local.cached_kafka_jars(_kafka_local.DEFAULT_KAFKA_VERSION)
    if problem is not None or libs is None:
        pytest.skip(f"needs cached Kafka jars and Java: {problem or 'no jars cached'}")
    java = _kafka_local.find_java()
    assert java is not None
    controller = free_port()
    data = tmp_path / "data"
    config = tmp_path / "server.properties"
    config.write_text(
        "process.roles=broker,controller\n"
        "node.id=1\n"
        f"controller.quorum.voters=1@127.0.0.1:{controller}\n"
        f"listeners=PLAINTEXT://127.0.0.1:{free_port()},CONTROLLER://127.0.0.1:{controller}\n"
        "controller.listener.names=CONTROLLER\n"
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n"
        f"log.dirs={data}\n"
    )
    cluster_id = "-Owps8Y1RD6Oi7nYe5xz_w"  # 16 bytes, first byte 0xf8: starts with "-"
    java_command = [java, "-Xmx128m", "-XX:TieredStopAtLevel=1", "-cp", str(libs / "*")]
    completed = subprocess.run(
        _kafka_local._storage_format_command(java_command, cluster_id, config),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert f"cluster.id={cluster_id}" in (data / "meta.properties").read_text()
