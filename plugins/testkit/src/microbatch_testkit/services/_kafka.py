"""What every Kafka provider offers tests: bootstrap servers, topics, a restartable broker."""

from __future__ import annotations

import re
import socket
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from ._process import wait_until
from ._restartable import RestartableService

__all__ = ["BROKER_SETTINGS", "KafkaService", "topic_name"]

BROKER_SETTINGS: dict[str, str] = {
    # One node: every internal topic has one replica and accepts writes with one in sync.
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "min.insync.replicas": "1",
    "num.partitions": "1",
    # Consumers join at once (and may use a short session.timeout.ms), and retention runs
    # every second so that tests can expire records.
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "500",
    # A broker killed and restarted re-registers after this session timeout, not 9 s.
    "broker.heartbeat.interval.ms": "500",
    "broker.session.timeout.ms": "3000",
    "log.retention.check.interval.ms": "1000",
    "log.initial.task.delay.ms": "0",
    "log.segment.delete.delay.ms": "1000",
    "auto.create.topics.enable": "true",
    "delete.topic.enable": "true",
    "num.io.threads": "4",
    "num.network.threads": "2",
}
"""Broker settings that every provider which starts a broker applies (tuned for tests)."""

_UNSAFE = re.compile(r"[^a-zA-Z0-9._-]+")


def topic_name(hint: str = "test") -> str:
    """A new topic name: ``hint`` made legal and short, then 8 random hex digits."""
    cleaned = _UNSAFE.sub("-", hint).strip("-.")[:60] or "test"
    return f"{cleaned}-{uuid.uuid4().hex[:8]}"


def _first_address(bootstrap_servers: str) -> tuple[str, int]:
    first = bootstrap_servers.split(",")[0].strip()
    host, _, port = first.rpartition(":")
    return host.strip("[]") or "127.0.0.1", int(port)


class KafkaService(RestartableService):
    """A Kafka cluster for tests, found or started by one of the providers.

    ``bootstrap_servers`` goes into any client's configuration; :meth:`client_config` builds
    one. :meth:`create_topic` makes a uniquely named topic. Providers that own the broker
    (``local``, ``docker``) also stop and start it with the same address and data
    (:meth:`restart`, :meth:`stopped`); ``can_restart`` tells whether this one can.
    """

    service = "Kafka broker"
    restartable_with = "MICROBATCH_SERVICES=local or docker"

    def __init__(self, bootstrap_servers: str = "", *, description: str = "") -> None:
        self.bootstrap_servers = bootstrap_servers
        self.description = description or f"Kafka at {bootstrap_servers}"
        self._admin: Any = None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.bootstrap_servers} ({self.provider})>"

    # -- clients and topics ---------------------------------------------------------------

    def client_config(self, **overrides: Any) -> dict[str, Any]:
        """A confluent-kafka configuration with ``bootstrap.servers`` set, plus ``overrides``.

        Keys use Kafka's dotted names; pass them with ``**{"group.id": "g"}``.
        """
        return {"bootstrap.servers": self.bootstrap_servers, **overrides}

    def admin(self) -> Any:
        """A shared ``confluent_kafka.admin.AdminClient`` for this cluster."""
        if self._admin is None:
            from confluent_kafka.admin import AdminClient

            self._admin = AdminClient(self.client_config())
        return self._admin

    def create_topic(
        self,
        partitions: int = 1,
        *,
        name: str | None = None,
        config: Mapping[str, str] | None = None,
        hint: str = "test",
        timeout: float = 30.0,
    ) -> str:
        """Create a topic with ``partitions`` partitions and return its name.

        ``name`` defaults to a new unique one built from ``hint``. ``config`` holds topic
        settings such as ``{"retention.ms": "1000"}``. Returns once every partition has a
        leader, so producing right away succeeds.
        """
        from confluent_kafka.admin import NewTopic

        topic = name or topic_name(hint)
        new = NewTopic(
            topic, num_partitions=partitions, replication_factor=1, config=dict(config or {})
        )
        futures = self.admin().create_topics([new], operation_timeout=timeout)
        futures[topic].result(timeout=timeout)
        if not wait_until(lambda: self._leaders_elected(topic, partitions), timeout=timeout):
            raise TimeoutError(
                f"topic {topic!r} on {self.bootstrap_servers} has no leader for all "
                f"{partitions} partitions after {timeout:.0f} s"
            )
        return topic

    def delete_topic(self, name: str, *, timeout: float = 30.0) -> None:
        """Delete a topic; a topic that does not exist is no error."""
        from confluent_kafka import KafkaError, KafkaException

        futures = self.admin().delete_topics([name], operation_timeout=timeout)
        try:
            futures[name].result(timeout=timeout)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise

    def _leaders_elected(self, topic: str, partitions: int) -> bool:
        metadata = self.admin().list_topics(topic=topic, timeout=5)
        found = metadata.topics.get(topic)
        if found is None or found.error is not None or len(found.partitions) != partitions:
            return False
        return all(p.leader >= 0 for p in found.partitions.values())

    def close(self) -> None:
        """Release the cluster: stop what this provider started and delete its data."""
        self._admin = None

    def wait_ready(self, *, timeout: float = 60.0, alive: Callable[[], bool] | None = None) -> bool:
        """Wait until the broker answers a metadata request; False on timeout or early death."""
        self._admin = None
        return wait_until(
            self._answers, timeout=timeout, alive=alive or (lambda: True), interval=0.1
        )

    def _answers(self) -> bool:
        host, port = _first_address(self.bootstrap_servers)
        try:
            with socket.create_connection((host, port), timeout=1):
                pass
        except OSError:
            return False
        from confluent_kafka import KafkaException

        try:
            metadata = self.admin().list_topics(timeout=2)
        except KafkaException:
            return False
        return bool(metadata.brokers)
