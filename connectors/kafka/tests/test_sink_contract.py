"""The ``kafka`` sink passes the testkit's sink suite against a real broker, at least once
(the default) and exactly once (``exactlyOnce=true``).

Contents are read back as a ``read_committed`` consumer sees them, up to the last stable
offset. In complete mode a Kafka topic keeps every batch (as Spark's Kafka sink does): a
consumer of the result reads the records of the newest batch, so ``read_back`` starts where
the newest batch started (the offsets are noted before each batch is written).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from microbatch import Guarantee, OutputMode, SinkCapabilities, StreamWriter
from microbatch_kafka.sink import KafkaSink
from microbatch_testkit import SinkContract

sys.path.insert(0, str(Path(__file__).parent))
from _kafka_sink_testing import read_records, records_table, stable_offsets

HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
BYTES_SCHEMA = pa.schema([("key", pa.binary()), ("value", pa.binary())])
TEXT_SCHEMA = pa.schema([("key", pa.string()), ("value", pa.string()), ("headers", HEADERS)])
COMMIT_KILLS = "6"
"""Kill points of the crash-inside-commit check by default (each costs a fork, a new
transactional producer and a read back); MICROBATCH_TESTKIT_COMMIT_KILLS=all for the soak."""


class KafkaSinkSuite(SinkContract):
    """Shared set-up: a new 3-partition topic per test, written through ``topic``."""

    __test__ = False
    ordered = False

    @pytest.fixture(autouse=True)
    def _kafka(self, kafka_service: Any, make_kafka_topic: Any) -> None:
        self.kafka = kafka_service
        self.topic = make_kafka_topic(3)
        self.batch_starts: dict[int, dict[int, int]] = {}

    def make_options(self) -> dict[str, Any]:
        return {"kafka.bootstrap.servers": self.kafka.bootstrap_servers, "topic": self.topic}

    def run_batch(self, writer: StreamWriter, batch_id: int, parts: Any) -> None:
        if self.built_of(writer).context.output_mode != OutputMode.COMPLETE:
            super().run_batch(writer, batch_id, parts)
            return
        starts = stable_offsets(self.kafka, self.topic)
        super().run_batch(writer, batch_id, parts)
        self.batch_starts.setdefault(batch_id, starts)  # a replay writes nothing new

    def read_back(self, writer: StreamWriter) -> pa.Table:
        start = None
        if self.built_of(writer).context.output_mode == OutputMode.COMPLETE and self.batch_starts:
            start = self.batch_starts[max(self.batch_starts)]
        return records_table(read_records(self.kafka, self.topic, start=start), self.input_schema())

    def bad_options(self) -> list[tuple[dict[str, Any], str]]:
        servers = {"kafka.bootstrap.servers": "localhost:9092"}
        return [
            (
                {"topic": "t"},
                "Option 'kafka.bootstrap.servers' must be specified for configuring Kafka producer",
            ),
            ({**servers, "topic": "t", "kafka.key.serializer": "x"}, "kafka.key.serializer"),
            ({**servers, "topic": "t", "kafka.transactional.id": "x"}, "exactlyOnce=true"),
            ({**servers, "exactlyOnce": "true"}, "exactlyOnceMarkerTopic"),
            (
                {**servers, "topic": "t", "exactlyOnce": "true", "kafka.enable.idempotence": "0"},
                "cannot be false with exactlyOnce=true",
            ),
            ({**servers, "topic": "t", "exactlyOnceUnknownBatch": "maybe"}, "fail, rewrite, skip"),
        ]


class TestKafkaSinkContract(KafkaSinkSuite):
    """At least once, bytes keys and values: the ``produce_batch`` path."""

    sink_class = KafkaSink

    def input_schema(self) -> pa.Schema:
        return BYTES_SCHEMA

    def input_batches(self) -> list[pa.RecordBatch]:
        return [
            pa.record_batch(
                [
                    pa.array([b"k0", None, b"", b"\x00\xff", b"k0"], pa.binary()),
                    pa.array([b"v0", b"", None, "é ✓".encode(), b"v0 again"], pa.binary()),
                ],
                schema=BYTES_SCHEMA,
            ),
            pa.record_batch([pa.array([], pa.binary()), pa.array([], pa.binary())], BYTES_SCHEMA),
            pa.record_batch(
                [
                    pa.array([f"key-{i}".encode() for i in range(7)], pa.binary()),
                    pa.array([b"x" * i for i in range(7)], pa.binary()),
                ],
                schema=BYTES_SCHEMA,
            ),
        ]


class ExactlyOnceKafkaSink(KafkaSink):
    """The sink as ``exactlyOnce=true`` makes it, declaring what it then guarantees."""

    capabilities = SinkCapabilities(
        output_modes=KafkaSink.capabilities.output_modes, guarantee=Guarantee.EXACTLY_ONCE
    )


class TestKafkaExactlyOnceSinkContract(KafkaSinkSuite):
    """Exactly once, string keys and values with headers: the ``produce()`` path."""

    sink_class = ExactlyOnceKafkaSink

    @pytest.fixture(autouse=True)
    def _few_kills(self, monkeypatch: pytest.MonkeyPatch) -> None:
        if not os.environ.get("MICROBATCH_TESTKIT_COMMIT_KILLS"):
            monkeypatch.setenv("MICROBATCH_TESTKIT_COMMIT_KILLS", COMMIT_KILLS)

    def make_options(self) -> dict[str, Any]:
        # The suite's query id is the same in every test: a prefix per test keeps their
        # transactional ids (and marker groups) apart.
        return {
            **super().make_options(),
            "exactlyOnce": "true",
            "transactionalIdPrefix": self.topic,
        }

    def input_schema(self) -> pa.Schema:
        return TEXT_SCHEMA

    def input_batches(self) -> list[pa.RecordBatch]:
        headers = [
            [{"key": "h", "value": b"1"}, {"key": "h", "value": b"2"}],
            None,
            [{"key": "empty", "value": b""}, {"key": "null", "value": None}],
            [{"key": "ü", "value": "ü".encode()}],
        ]
        return [
            pa.record_batch(
                [
                    pa.array(["k0", None, "", "ключ"], pa.string()),
                    pa.array(["v0", "", None, "значение"], pa.string()),
                    pa.array(headers, HEADERS),
                ],
                schema=TEXT_SCHEMA,
            ),
            pa.record_batch(
                [
                    pa.array([f"key-{i}" for i in range(6)], pa.string()),
                    pa.array([f"value-{i}" for i in range(6)], pa.string()),
                    pa.array([None] * 6, HEADERS),
                ],
                schema=TEXT_SCHEMA,
            ),
        ]
