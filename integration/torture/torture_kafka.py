"""Input topics and output checks of the torture run's Kafka pipelines.

:class:`KafkaInput` writes chunks of records into a 3-partition input topic, each record with
an id of its own, and remembers where every committed one landed. Most chunks are plain
produce calls; some go through a transaction, and a third of those are aborted (their records
must never reach a sink: the pipelines read ``read_committed``). The checks read a sink as a
user would (the parquet table through its manifest; an output topic with a ``read_committed``
consumer up to the last stable offset) and compare it with the committed input.
"""

from __future__ import annotations

import json
import random
import sys
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torture_check import SinkReport

import microbatch as mb

# the reading helpers of the connector's crash tests
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "connectors/kafka/tests/scripts"))
import kafka_crash_pipeline as crash_pipeline

__all__ = ["PARTITIONS", "InputRecord", "KafkaInput", "check_parquet", "check_topic", "end_offsets"]

PARTITIONS = 3


@dataclass(frozen=True)
class InputRecord:
    """A committed input record: where it landed and its value."""

    partition: int
    offset: int
    value: bytes


@dataclass
class KafkaInput:
    """The input topic of one Kafka pipeline and every record committed into it."""

    bootstrap: str
    topic: str
    rng: random.Random
    max_rows: int = 40
    transaction_share: float = 0.25
    rows: dict[int, InputRecord] = field(default_factory=dict)
    aborted: set[int] = field(default_factory=set)
    methods: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(("plain", "committed", "aborted"), 0)
    )
    _next_id: int = 0
    _chunks: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _producer: Any = None
    _transactional: Any = None

    def _plain(self) -> Any:
        if self._producer is None:
            from confluent_kafka import Producer

            self._producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 2})
        return self._producer

    def _txn(self) -> Any:
        if self._transactional is None:
            from confluent_kafka import Producer

            self._transactional = Producer(
                {
                    "bootstrap.servers": self.bootstrap,
                    "transactional.id": f"torture-input-{self.topic}-{uuid.uuid4().hex[:6]}",
                    "linger.ms": 2,
                }
            )
            self._transactional.init_transactions(60)
        return self._transactional

    def add(self) -> str:
        """Write one chunk of 0..max_rows records; return how it was written."""
        with self._lock:
            rng = self.rng
            chunk = self._chunks
            self._chunks += 1
            count = 0 if rng.random() < 0.04 else rng.randint(1, self.max_rows)
            draw = rng.random()
            method = "plain"
            if draw < self.transaction_share:
                method = "aborted" if draw < self.transaction_share / 3 else "committed"
            self.methods[method] += 1
            pause = rng.uniform(0.0, 0.2)
            records = []
            for row in range(count):
                ident = self._next_id
                self._next_id += 1
                value = json.dumps({"id": ident, "chunk": chunk, "note": f"c{chunk}r{row}"})
                records.append((ident, rng.randrange(PARTITIONS), value.encode()))
            self._write(method, records, pause)
        return method

    def _write(self, method: str, records: list[tuple[int, int, bytes]], pause: float) -> None:
        landed: dict[int, InputRecord] = {}
        failed: list[str] = []

        def delivered(ident: int) -> Any:
            def report(error: Any, message: Any) -> None:
                if error is not None:
                    failed.append(str(error))
                else:
                    landed[ident] = InputRecord(
                        message.partition(), message.offset(), message.value()
                    )

            return report

        producer = self._plain() if method == "plain" else self._txn()
        if method != "plain":
            producer.begin_transaction()
        for ident, partition, value in records:
            producer.produce(
                self.topic,
                key=f"id{ident}".encode(),
                value=value,
                partition=partition,
                on_delivery=delivered(ident),
            )
        remaining = producer.flush(60)
        if method != "plain":
            time.sleep(pause)  # the transaction stays open a moment while pipelines read
            if method == "aborted":
                producer.abort_transaction(60)
            else:
                producer.commit_transaction(60)
        if remaining or failed:
            raise RuntimeError(
                f"producing into {self.topic}: {remaining} left, errors {failed[:3]}"
            )
        if method == "aborted":
            self.aborted.update(landed)
        else:
            self.rows.update(landed)

    def add_many(self, count: int) -> None:
        for _ in range(count):
            self.add()

    @property
    def file_count(self) -> int:
        """The number of chunks written (named as the file input's count)."""
        return self._chunks

    def close(self) -> None:
        for producer in (self._producer, self._transactional):
            if producer is not None:
                producer.flush(10)


def end_offsets(bootstrap: str, topic: str, *, committed: bool) -> dict[int, int]:
    """Per partition: the last stable offset (``committed``) or the high watermark."""
    return crash_pipeline.end_offsets(bootstrap, topic, PARTITIONS, committed=committed)


def read_topic(
    bootstrap: str, topic: str, *, committed: bool = True, timeout: float = 120.0
) -> list[tuple[bytes | None, bytes | None]]:
    """Every record of ``topic`` as ``(key, value)``, from the beginning to the end of each
    partition: the last stable offset with ``committed`` (``read_committed``)."""
    return crash_pipeline.read_topic(
        bootstrap, topic, PARTITIONS, committed=committed, timeout=timeout, group="torture-check"
    )


def _identify(value: bytes | None) -> int | None:
    try:
        return int(json.loads(value or b"")["id"])
    except (ValueError, KeyError, TypeError):
        return None


def _compare(
    found: list[tuple[int | None, tuple[int, int] | None, bytes | None]],
    source: KafkaInput,
    *,
    doubles_allowed: bool,
) -> SinkReport:
    """``found`` holds ``(id, (partition, offset) of origin, value)`` per sink row."""
    expected = source.rows
    counts = Counter(ident for ident, _, _ in found)
    bad = [
        row
        for row in found
        if row[0] not in expected
        or row[1] != (expected[row[0]].partition, expected[row[0]].offset)
        or row[2] != expected[row[0]].value
    ]
    report = SinkReport(
        expected=len(expected),
        found=len(found),
        lost=sum(1 for ident in expected if ident not in counts),
        doubled=sum(count - 1 for ident, count in counts.items() if ident in expected),
        bad=len(bad),
        seen={ident for ident in counts if ident is not None},
        doubles_allowed=doubles_allowed,
    )
    from_aborted = sum(1 for ident, _, _ in found if ident in source.aborted)
    if from_aborted:
        report.problems.append(f"{from_aborted} rows come from aborted input transactions")
    if bad:
        report.problems.append(f"{len(bad)} rows match no input record, e.g. {bad[:3]}")
    return report


def check_parquet(output: str, source: KafkaInput) -> SinkReport:
    """Read the parquet sink at ``output`` through its manifest; compare with the input."""
    try:
        table = mb.Session().read.format("parquet").load(output)
        names = ("topic", "partition", "offset", "value")
        columns = [table.column(name).to_pylist() for name in names] if table.num_rows else []
        rows = list(zip(*columns, strict=True))
    except Exception as error:  # reported, not raised: the summary still prints
        expected = len(source.rows)
        return SinkReport(expected, 0, expected, 0, 0, [f"reading {output}: {error}"])
    found = [
        (_identify(value), (partition, offset) if topic == source.topic else None, value)
        for topic, partition, offset, value in rows
    ]
    return _compare(found, source, doubles_allowed=False)


def check_topic(topic: str, source: KafkaInput, *, doubles_allowed: bool) -> SinkReport:
    """Read ``topic`` with ``read_committed`` up to the last stable offset; compare with the
    input (keys are the records' origins, ``"<topic>/<partition>/<offset>"``)."""
    try:
        records = read_topic(source.bootstrap, topic)
    except Exception as error:
        expected = len(source.rows)
        return SinkReport(expected, 0, expected, 0, 0, [f"reading {topic}: {error}"])
    found = []
    for key, value in records:
        origin_topic, _, rest = (key or b"").decode(errors="replace").partition("/")
        partition, _, offset = rest.partition("/")
        origin = None
        if origin_topic == source.topic and partition.isdigit() and offset.isdigit():
            origin = (int(partition), int(offset))
        found.append((_identify(value), origin, value))
    return _compare(found, source, doubles_allowed=doubles_allowed)
