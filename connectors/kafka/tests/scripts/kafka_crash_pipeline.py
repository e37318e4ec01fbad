"""A crash-test pipeline: a Kafka topic -> the parquet sink or a Kafka topic, available-now.

Usage: python kafka_crash_pipeline.py SINK BOOTSTRAP INPUT_TOPIC OUTPUT CHECKPOINT LIMIT [AT]

SINK is ``parquet`` (OUTPUT is a folder; every source column is written), ``eos`` (OUTPUT is a
topic, ``exactlyOnce=true``) or ``alo`` (OUTPUT is a topic, the default at-least-once mode).
Into a topic the record's key is its origin, ``"<topic>/<partition>/<offset>"``, and its value
the input value. The source reads the input topic from the earliest offsets,
``maxOffsetsPerTrigger=LIMIT`` records per batch, with the available-now trigger.

The torture run's Kafka pipelines (``integration/torture``) start and read with these
functions too. The testkit's crash hook is armed (``MICROBATCH_CRASH_AT``). ``AT`` moves the
``mid_sink`` crash point into the Kafka client: ``txn-open`` / ``txn-done`` just before
``commit_transaction()`` (the batch's records are produced, the transaction is open) or just
after it returned (committed in Kafka, the sink's ``commit`` has not returned);
``before-flush`` at the first ``flush()`` of the batch (records handed to the client, their
delivery not confirmed).
"""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

import microbatch as mb
from microbatch_testkit import crash


def kill_inside_client(at: str) -> None:
    """Make every producer call ``crash_point("mid_sink", batch)`` where ``at`` says."""
    import confluent_kafka

    base = confluent_kafka.Producer

    class CrashingProducer(base):  # type: ignore[misc, valid-type]
        def flush(self, *args: Any) -> Any:
            if at == "before-flush":
                crash.crash_point("mid_sink", crash.running_batch())
            return super().flush(*args)

        def commit_transaction(self, *args: Any) -> Any:
            if at == "txn-open":  # every record at the broker, in the open transaction
                super().flush(30)
                crash.crash_point("mid_sink", crash.running_batch())
            result = super().commit_transaction(*args)
            if at == "txn-done":
                crash.crash_point("mid_sink", crash.running_batch())
            return result

    confluent_kafka.Producer = CrashingProducer  # type: ignore[misc]


def start_query(
    session: mb.Session,
    sink: str,
    bootstrap: str,
    topic: str,
    output: str,
    checkpoint: str,
    limit: int,
    *,
    drain: bool = True,
    source_options: Mapping[str, str] | None = None,
) -> Any:
    """Start the pipeline into ``sink`` (``parquet``, ``eos`` or ``alo``, as the usage above
    says) with the available-now trigger if ``drain``, else the default one; return the query.
    ``source_options`` are further options of the Kafka source."""
    frame = (
        session.read_stream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", limit)
        .options(**(source_options or {}))
        .load()
    )
    if sink == "parquet":
        writer = frame.write_stream.format("parquet").option("path", output)
    else:
        origin = pc.binary_join_element_wise(
            pc.field("topic"),
            pc.field("partition").cast(pa.string()),
            pc.field("offset").cast(pa.string()),
            "/",
        )
        writer = (
            frame.select(key=origin, value=pc.field("value"))
            .write_stream.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", output)
            .option("exactlyOnce", sink == "eos")
        )
    writer = writer.option("checkpointLocation", checkpoint)
    if drain:
        writer = writer.trigger(available_now=True)
    return writer.start()


def end_offsets(bootstrap: str, topic: str, partitions: int, *, committed: bool) -> dict[int, int]:
    """Per partition of ``topic`` (``partitions`` of them): the last stable offset
    (``committed``) or the high watermark."""
    from confluent_kafka import IsolationLevel, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    admin = AdminClient({"bootstrap.servers": bootstrap})
    level = IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED
    asked = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)}
    futures = admin.list_offsets(asked, isolation_level=level, request_timeout=30)
    return {tp.partition: future.result().offset for tp, future in futures.items()}


def read_topic(
    bootstrap: str,
    topic: str,
    partitions: int,
    *,
    committed: bool = True,
    timeout: float = 30.0,
    group: str = "crash-check",
) -> list[tuple[bytes | None, bytes | None]]:
    """Every record of ``topic`` (``partitions`` partitions) as ``(key, value)``, from the
    beginning to the end of each partition: the last stable offset with ``committed``
    (``read_committed``), else the high watermark. Raises :class:`TimeoutError` when the
    partitions have not all ended after ``timeout`` seconds, :class:`RuntimeError` for a
    consumer error. ``group`` prefixes the consumer's (unique, uncommitted) group id."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"{group}-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 20,
            "isolation.level": "read_committed" if committed else "read_uncommitted",
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        pending: set[int] = set(range(partitions))
        records: list[tuple[bytes | None, bytes | None]] = []
        deadline = time.monotonic() + timeout
        while pending:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}: partitions {sorted(pending)} did not end")
            for message in consumer.consume(1000, 0.2):
                error = message.error()
                if error is None:
                    records.append((message.key(), message.value()))
                elif error.code() == KafkaError._PARTITION_EOF:
                    pending.discard(message.partition())
                else:
                    raise RuntimeError(f"reading {topic}: {error}")
        return records
    finally:
        consumer.close()


def main(
    sink: str, bootstrap: str, topic: str, output: str, checkpoint: str, limit: str, at: str = ""
) -> None:
    if at:
        kill_inside_client(at)
    session = mb.Session()
    crash.arm(session, mid_sink_in_script=bool(at))
    query = start_query(session, sink, bootstrap, topic, output, checkpoint, int(limit))
    crash.await_available_now(query)


if __name__ == "__main__":
    main(*sys.argv[1:])
