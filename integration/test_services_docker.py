"""The docker providers, run whenever a Docker daemon answers (skipped otherwise).

They are started here directly, whatever ``MICROBATCH_SERVICES`` says, so that the docker
code is exercised on any machine with Docker even when the suite runs with other providers.
"""

from __future__ import annotations

import time
import uuid

import pytest
import sqlalchemy as sa
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from microbatch_testkit.services import DockerKafka, DockerPostgres, MachineProbe

DOCKER_PROBLEM = MachineProbe().docker_problem()
pytestmark = pytest.mark.skipif(DOCKER_PROBLEM is not None, reason=str(DOCKER_PROBLEM))


def _read(kafka: DockerKafka, topic: str, expect: int) -> list[bytes]:
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


def test_docker_kafka_transactions_and_restart() -> None:
    kafka = DockerKafka()
    try:
        kafka.start()
        assert kafka.description.startswith("Apache Kafka (apache/kafka:")
        topic = kafka.create_topic(2)
        producer = Producer(kafka.client_config(**{"transactional.id": f"tx-{topic}"}))
        producer.init_transactions(60)
        producer.begin_transaction()
        for n in range(100):
            producer.produce(topic, key=str(n).encode(), value=str(n).encode())
        producer.commit_transaction(60)  # markers go through the in-container listener
        producer.begin_transaction()
        producer.produce(topic, key=b"x", value=b"aborted")
        producer.abort_transaction(60)
        assert sorted(int(v) for v in _read(kafka, topic, 100)) == list(range(100))

        kafka.restart()
        assert sorted(int(v) for v in _read(kafka, topic, 100)) == list(range(100))
    finally:
        kafka.close()


def test_docker_postgres_round_trip() -> None:
    postgres = DockerPostgres()
    try:
        postgres.start()
        database = postgres.create_database(hint="docker")
        engine = sa.create_engine(database.url)
        try:
            with engine.begin() as connection:
                connection.execute(sa.text("CREATE TABLE t (n int)"))
                connection.execute(sa.text("INSERT INTO t VALUES (1), (2)"))
            with engine.connect() as connection:
                assert connection.execute(sa.text("SELECT sum(n) FROM t")).scalar() == 3
        finally:
            engine.dispose()
        postgres.drop_database(database.name)
    finally:
        postgres.close()
