"""The test kit's source suite against the Kafka source on a real broker."""

from __future__ import annotations

from typing import Any

import pytest

from microbatch import StreamReader
from microbatch_kafka.source import KafkaSource
from microbatch_testkit import SourceContract

PARTITIONS = 3
PER_PARTITION = 4


class TestKafkaSourceContract(SourceContract):
    source_class = KafkaSource

    @pytest.fixture(autouse=True)
    def _topic(self, make_kafka_topic: Any, kafka_service: Any, produce_each: Any) -> None:
        self.topic = make_kafka_topic(PARTITIONS)
        self.bootstrap = kafka_service.bootstrap_servers
        self.produce_each = produce_each
        self.rounds = 0

    def make_options(self) -> dict[str, Any]:
        return {
            "kafka.bootstrap.servers": self.bootstrap,
            "subscribe": self.topic,
            "startingOffsets": "earliest",
            "maxOffsetsPerTrigger": 6,
        }

    def produce(self, reader: StreamReader) -> None:
        # equal counts per partition: Spark's round-up of small shares could otherwise exceed
        # the limit, which the suite's limit check does not allow
        self.produce_each(self.topic, PARTITIONS, PER_PARTITION, first=self.rounds * PER_PARTITION)
        self.rounds += 1

    def bad_options(self) -> list[tuple[dict[str, Any], str]]:
        base = {"kafka.bootstrap.servers": self.bootstrap}
        return [
            ({"subscribe": self.topic}, "kafka.bootstrap.servers' must be specified"),
            (base, "exactly one of 'subscribe', 'subscribePattern', 'assign' must be set"),
            ({**base, "subscribe": "a", "assign": '{"a":[0]}'}, "exactly one of"),
            ({**base, "subscribe": "a", "kafka.auto.offset.reset": "earliest"}, "startingOffsets"),
            ({**base, "subscribe": "a", "maxOffsetsPerTrigger": 0}, "must be at least 1"),
            ({**base, "subscribe": "a", "minPartitions": 0}, "must be at least 1"),
            ({**base, "subscribe": "a", "endingOffsets": "latest"}, "ending offset not valid"),
        ]
