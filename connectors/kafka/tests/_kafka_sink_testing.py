"""Shared by the sink's tests: reading a topic back as ``read_committed`` consumers see it.

Reads stop at the last stable offset (``list_offsets`` under READ_COMMITTED), never at the
high watermark: a transaction left open by a killed writer blocks read_committed readers at
its first record until a new writer of the same transactional.id settles it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
from confluent_kafka import Consumer, IsolationLevel, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import OffsetSpec

__all__ = ["Record", "end_offsets", "read_records", "records_table", "stable_offsets"]

Record = dict[str, Any]


def end_offsets(service: Any, topic: str, *, committed: bool = True) -> dict[int, int]:
    """Each partition's last stable offset (``committed``) or high watermark."""
    admin = service.admin()
    metadata = admin.list_topics(timeout=10).topics[topic]
    specs = {TopicPartition(topic, p): OffsetSpec.latest() for p in metadata.partitions}
    level = IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED
    for attempt in range(50):  # a new topic's leaders may not be known to the client yet
        futures = admin.list_offsets(specs, isolation_level=level, request_timeout=10)
        try:
            return {tp.partition: future.result().offset for tp, future in futures.items()}
        except KafkaException:  # NOT_LEADER_FOR_PARTITION until its metadata is refreshed
            if attempt == 49:
                raise
            time.sleep(0.1)
    raise AssertionError("unreachable")


def stable_offsets(service: Any, topic: str, *, settle: float = 0.5) -> dict[int, int]:
    """The last stable offsets, once the commit markers of just-committed transactions are
    written (``commit_transaction`` returns before the coordinator writes them), or after
    ``settle`` seconds (a transaction of a killed writer stays open)."""
    deadline = time.monotonic() + settle
    while True:
        stable = end_offsets(service, topic)
        if stable == end_offsets(service, topic, committed=False) or time.monotonic() > deadline:
            return stable
        time.sleep(0.02)


def read_records(
    service: Any,
    topic: str,
    *,
    start: Mapping[int, int] | None = None,
    isolation: str = "read_committed",
    timeout: float = 30.0,
) -> list[Record]:
    """Every record of ``topic`` from ``start`` (default: the beginning) up to the end a
    reader of ``isolation`` may reach now, as dicts (key, value, headers, partition, offset,
    timestamp type)."""
    if isolation == "read_committed":
        ends = stable_offsets(service, topic)
    else:
        ends = end_offsets(service, topic, committed=False)
    begins = {p: (start or {}).get(p, 0) for p in ends}
    pending = {p for p in ends if begins[p] < ends[p]}
    if not pending:
        return []
    consumer = Consumer(
        service.client_config(
            **{
                "group.id": f"sink-read-back-{uuid.uuid4().hex[:8]}",
                "isolation.level": isolation,
                "enable.auto.commit": False,
                "enable.partition.eof": True,
            }
        )
    )
    records: list[Record] = []
    try:
        consumer.assign([TopicPartition(topic, p, begins[p]) for p in sorted(pending)])
        deadline = time.monotonic() + timeout
        while pending:
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {topic} back: partitions {pending} did not end")
            for message in consumer.consume(1000, 0.05):
                partition, offset = int(message.partition() or 0), int(message.offset() or 0)
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        if offset >= ends.get(partition, 0):
                            pending.discard(partition)
                        continue
                    raise RuntimeError(f"reading {topic} back: {error}")
                if offset >= ends[partition]:
                    pending.discard(partition)
                    continue
                records.append(
                    {
                        "key": message.key(),
                        "value": message.value(),
                        "headers": message.headers(),
                        "partition": partition,
                        "offset": offset,
                        "timestamp_type": message.timestamp()[0],
                    }
                )
                if offset >= ends[partition] - 1:
                    pending.discard(partition)
    finally:
        consumer.close()
    return records


def _as(value: bytes | None, dtype: pa.DataType) -> Any:
    if value is None or not pa.types.is_string(dtype):
        return value
    return value.decode("utf-8")


def records_table(records: list[Record], schema: pa.Schema) -> pa.Table:
    """``records`` as a table of ``schema``'s columns (key, value, headers, partition)."""
    rows = []
    for record in records:
        row: dict[str, Any] = {}
        for field in schema:
            if field.name == "headers":
                headers = record["headers"]
                row["headers"] = (
                    None if headers is None else [{"key": k, "value": v} for k, v in headers]
                )
            else:
                row[field.name] = _as(record[field.name], field.type)
        rows.append(row)
    return pa.Table.from_pylist(rows, schema=schema)


def run_into_kafka(
    batches: list[pa.Table],
    options: Mapping[str, Any],
    checkpoint: str,
    *,
    conf: Mapping[str, Any] | None = None,
    timeout: float = 60.0,
) -> Any:
    """Run an available-now query writing ``batches`` (one micro-batch each) into the
    ``kafka`` sink with ``options``; returns the ended query (``query.exception()`` says how
    it ended)."""
    import microbatch as mb
    from microbatch_testkit._engine import ROWS_FORMAT, RowsSource, ensure_registered

    session = mb.Session(conf={"batchRetryBackoff": "10 milliseconds", **(conf or {})})
    ensure_registered(session, "source", RowsSource)
    schema = batches[0].schema
    query = (
        session.read_stream.format(ROWS_FORMAT)
        .option("batches", [[table.to_batches()] for table in batches])
        .option("rowsSchema", schema)
        .load()
        .write_stream.format("kafka")
        .options(**options)
        .option("checkpointLocation", checkpoint)
        .trigger(available_now=True)
        .start()
    )
    try:
        ended = query.await_termination(timeout=timeout)
    except mb.errors.StreamingQueryException:
        return query  # query.exception() holds the error
    if not ended:
        query.stop()
        raise AssertionError(f"the query into Kafka did not end within {timeout:g} s")
    return query
