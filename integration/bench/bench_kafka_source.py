"""Kafka source to the no-op sink against a plain confluent-kafka consume loop, in one run.

A topic of 1M records (100-byte values, short keys) over 4 partitions is filled once; then,
after one warm-up read, interleaved and repeated (each first in turn):

- ``plain-split``: the connector's columns built as the fastest recipe does, one partition
  after the other, each read by a new consumer from offset 0 to its end (``assign``, then
  ``consume(10_000)`` calls): four list comprehensions over the messages, ``pa.array`` per
  column, ``pa.repeat`` for the constant topic and partition, ``RecordBatch``es of the
  source's schema gathered into batches of 64k rows;
- ``plain-one``: the same with one consumer assigned every partition (the partition column
  then comes from every message);

  both plain loops set ``fetch.queue.backoff.ms=10`` (see ``PLAIN_SETTINGS``);
- ``microbatch``: ``format("kafka")`` with ``startingOffsets=earliest`` and the available-now
  trigger into ``format("noop")``: planning, offset fetches, splits, checkpoint and all.

Records per second of each (best of ``--repeat``) and the ratio of microbatch to the faster
plain loop (the goal is 80% or more), and the CPU time per record of each (all threads of
the process, librdkafka's included), which depends less on what else the machine runs.
``--profile`` samples the stacks of a further microbatch run and prints where the time goes.
Usage::

    .venv/bin/python integration/bench/bench_kafka_source.py [--records 1000000] [--partitions 4]

The broker: ``MICROBATCH_KAFKA_BOOTSTRAP`` with ``MICROBATCH_SERVICES=external``, else one the
test kit starts for the run (see ``kafka_bench_support.py``).
"""

from __future__ import annotations

import argparse
import gc
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from kafka_bench_support import (
    Sampler,
    add_source_option_argument,
    add_volume_arguments,
    best_rate,
    end_offsets,
    fill,
    kafka_broker,
    median_rate,
)
from kafka_bench_support import topic as new_topic

import microbatch as mb
from microbatch_testkit.services import KafkaService

ROOT = Path(__file__).resolve().parents[2]
CHUNK = 10_000
BATCH_ROWS = 65_536
MICROSECONDS_PER_MS = pa.scalar(1000, pa.int64())


def source_schema(session: mb.Session, bootstrap: str, topic: str) -> pa.Schema:
    """The Arrow schema of the connector's rows (without headers)."""
    frame = (
        session.read_stream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .load()
    )
    return frame.schema


PLAIN_SETTINGS = {
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "enable.partition.eof": True,
    "auto.offset.reset": "error",
    "isolation.level": "read_uncommitted",
    # librdkafka's default (1000 ms) pauses the fetcher for a second each time its local
    # queue reached queued.min.messages, even once consume() has emptied it: a reader that
    # keeps up with the broker waits most of the time.
    "fetch.queue.backoff.ms": 10,
}


def plain_consumer(service: KafkaService) -> Any:
    from confluent_kafka import Consumer

    return Consumer(
        service.client_config(
            **{"group.id": f"bench-plain-{uuid.uuid4().hex[:8]}", **PLAIN_SETTINGS}
        )
    )


def data_only(messages: list[Any]) -> tuple[list[Any], list[Any]]:
    """``(messages, events)``: an error event (EOF...) is not a record."""
    events = [m for m in messages if m.error() is not None]
    if events:
        messages = [m for m in messages if m.error() is None]
    return messages, events


def columns(
    messages: list[Any], topic: pa.Scalar, partition: pa.Array | pa.Scalar, schema: pa.Schema
) -> pa.RecordBatch:
    """The connector's columns for ``messages``, as the recipe builds them."""
    keys = [m.key() for m in messages]
    values = [m.value() for m in messages]
    offsets = [m.offset() for m in messages]
    stamps = [m.timestamp() for m in messages]
    count = len(messages)
    types = {t[0] for t in stamps}
    timestamp_types = (
        pa.repeat(pa.scalar(types.pop() - 1, pa.int32()), count)
        if len(types) == 1
        else pa.array([t[0] - 1 for t in stamps], pa.int32())
    )
    milliseconds = pa.array([t[1] for t in stamps], pa.int64())
    arrays = [
        pa.array(keys, pa.binary()),
        pa.array(values, pa.binary()),
        pa.repeat(topic, count),
        partition if isinstance(partition, pa.Array) else pa.repeat(partition, count),
        pa.array(offsets, pa.int64()),
        pc.multiply(milliseconds, MICROSECONDS_PER_MS).cast(schema.field("timestamp").type),
        timestamp_types,
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


class Batches:
    """Chunks gathered into record batches of about ``BATCH_ROWS`` rows, then dropped."""

    def __init__(self) -> None:
        self.pending: list[pa.RecordBatch] = []
        self.pending_rows = 0
        self.rows = 0

    def add(self, batch: pa.RecordBatch) -> None:
        self.pending.append(batch)
        self.pending_rows += batch.num_rows
        if self.pending_rows >= BATCH_ROWS:
            self.flush()

    def flush(self) -> None:
        if self.pending:
            self.rows += pa.Table.from_batches(self.pending).combine_chunks().num_rows
            self.pending, self.pending_rows = [], 0


def run_plain_per_partition(
    service: KafkaService, topic: str, partitions: int, schema: pa.Schema
) -> int:
    """Records read with the recipe, one partition after the other, each with a new consumer.

    (Re-assigning one consumer to the next partition waits out the long-poll fetch it left
    at the end of the previous one, ``fetch.wait.max.ms``: 500 ms a partition.)
    """
    from confluent_kafka import KafkaError, TopicPartition

    out = Batches()
    topic_scalar = pa.scalar(topic, pa.string())
    for partition in range(partitions):
        consumer = plain_consumer(service)
        end = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)[1]
        consumer.assign([TopicPartition(topic, partition, 0)])
        partition_scalar = pa.scalar(partition, pa.int32())
        position = 0
        while position < end:
            messages, events = data_only(consumer.consume(min(CHUNK, end - position), 1.0))
            for event in events:
                if event.error().code() != KafkaError._PARTITION_EOF:
                    raise RuntimeError(f"plain loop: {event.error()}")
                position = max(position, event.offset())
            if messages:
                out.add(columns(messages, topic_scalar, partition_scalar, schema))
                position = messages[-1].offset() + 1
        out.flush()
        consumer.close()
    return out.rows


def run_plain_all_partitions(
    service: KafkaService, topic: str, partitions: int, schema: pa.Schema
) -> int:
    """Records read by one consumer assigned every partition (the partition column is then
    one more value taken from every message)."""
    from confluent_kafka import KafkaError, TopicPartition

    consumer = plain_consumer(service)
    total = sum(
        consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
        for p in range(partitions)
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out = Batches()
    topic_scalar = pa.scalar(topic, pa.string())
    read = 0
    at_end: set[int] = set()
    while read < total and len(at_end) < partitions:
        messages, events = data_only(consumer.consume(CHUNK, 1.0))
        for event in events:
            if event.error().code() != KafkaError._PARTITION_EOF:
                raise RuntimeError(f"plain loop: {event.error()}")
            at_end.add(event.partition())
        if messages:
            partition = pa.array([m.partition() for m in messages], pa.int32())
            out.add(columns(messages, topic_scalar, partition, schema))
            read += len(messages)
    out.flush()
    consumer.close()
    return out.rows


def run_microbatch(
    session: mb.Session,
    bootstrap: str,
    topic: str,
    work: Path,
    progress: list[Any],
    options: dict[str, str],
) -> int:
    """Records read by the query (the timed part starts with the query); its progress records
    replace the content of ``progress``."""
    with tempfile.TemporaryDirectory(dir=work) as checkpoint:
        query = (
            session.read_stream.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .options(**options)
            .load()
            .write_stream.format("noop")
            .option("checkpointLocation", checkpoint)
            .trigger(available_now=True)
            .start()
        )
        query.await_termination()
        progress[:] = query.recent_progress
    return sum(p["numInputRows"] for p in progress)


def timed(function: Callable[..., int], *arguments: Any) -> tuple[int, float]:
    """``(records, seconds)`` of one call; its CPU seconds (every thread of this process,
    librdkafka's included) go into ``CPU[function]``."""
    gc.collect()
    began, cpu = time.perf_counter(), time.process_time()
    records = function(*arguments)
    CPU.setdefault(function, []).append((records, time.process_time() - cpu))
    return records, time.perf_counter() - began


CPU: dict[Callable[..., int], list[tuple[int, float]]] = {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_volume_arguments(parser)
    parser.add_argument(
        "--read-threads", type=int, help="the session's maxReadThreads (default: the engine's)"
    )
    parser.add_argument("--profile", action="store_true", help="sample a further microbatch run")
    add_source_option_argument(parser)
    parser.add_argument("--dir", default=str(ROOT / ".bench-work"))
    args = parser.parse_args()
    work = Path(args.dir)
    work.mkdir(parents=True, exist_ok=True)
    conf = {"noDataProgressEventInterval": "1 hour"}
    if args.read_threads:
        conf["maxReadThreads"] = args.read_threads
    session = mb.Session(conf=conf)
    options = dict(args.option)

    with kafka_broker() as service, new_topic(service, args.partitions, "bench-source") as topic:
        began = time.perf_counter()
        fill(service, topic, args.partitions, args.records, args.value_bytes)
        written = sum(end_offsets(service, topic, args.partitions).values())
        print(
            f"topic: {written:,} records of {args.value_bytes} bytes in {args.partitions} "
            f"partitions, written in {time.perf_counter() - began:.1f} s"
        )
        bootstrap = service.bootstrap_servers
        schema = source_schema(session, bootstrap, topic)
        plains = {
            "plain-split": run_plain_per_partition,
            "plain-one": run_plain_all_partitions,
        }
        runs: dict[str, list[tuple[int, float]]] = {kind: [] for kind in [*plains, "microbatch"]}
        progress: list[Any] = []
        contenders: dict[str, tuple[Callable[..., int], tuple[Any, ...]]] = {
            kind: (plain, (service, topic, args.partitions, schema))
            for kind, plain in plains.items()
        }
        contenders["microbatch"] = (
            run_microbatch,
            (session, bootstrap, topic, work, progress, options),
        )
        timed(run_plain_per_partition, service, topic, args.partitions, schema)  # warm-up
        kinds = list(contenders)
        for round_ in range(args.repeat):
            # interleaved, so that all see the same machine state, first in turn
            for kind in kinds[round_ % len(kinds) :] + kinds[: round_ % len(kinds)]:
                function, arguments = contenders[kind]
                runs[kind].append(timed(function, *arguments))
        for kind, results in runs.items():
            wrong = [records for records, _ in results if records != written]
            if wrong:
                raise SystemExit(f"{kind} read {wrong[0]:,} records, not {written:,}")

        print(f"Kafka source to noop, {written:,} records, best of {args.repeat}:")
        for kind, results in runs.items():
            print(
                f"  {kind:<11} {best_rate(results):>12,.0f} records/s"
                f"  (median {median_rate(results):,.0f})"
            )
        baseline = max(plains, key=lambda kind: best_rate(runs[kind]))
        ratio = best_rate(runs["microbatch"]) / best_rate(runs[baseline])
        print(f"  microbatch / {baseline}: {ratio:.0%} (goal: 80% or more)")
        # CPU time is less sensitive than wall time to what else the machine runs.
        cpu = {kind: CPU[contenders[kind][0]][-args.repeat :] for kind in kinds}
        used = {kind: min(c / r for r, c in runs_ if r) * 1e6 for kind, runs_ in cpu.items()}
        print(
            "  CPU per record (best, this process, librdkafka threads included): "
            + ", ".join(f"{kind} {us:.2f} us" for kind, us in used.items())
        )
        batches = [p for p in progress if p["numInputRows"]]
        if batches:
            durations: dict[str, int] = {}
            for p in batches:
                for name, ms in p["durationMs"].items():
                    durations[name] = durations.get(name, 0) + ms
            shown = ", ".join(f"{name} {ms}" for name, ms in durations.items())
            print(f"  last microbatch run: {len(batches)} batches, durationMs {shown}")

        if args.profile:
            with Sampler() as sampler:
                run_microbatch(session, bootstrap, topic, work, progress, options)
            sampler.report()


if __name__ == "__main__":
    main()
