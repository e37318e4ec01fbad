"""Kafka sink, at least once and exactly once, against plain confluent-kafka producer loops.

The same keyed records (1M by default: 100-byte values, short keys, as an Arrow table of
``key`` and ``value`` binary columns) are written into a new topic of 4 partitions by each
contender, interleaved and repeated, each run in a new child process (so that no producer or
connection outlives its run; building the table is not timed):

- ``plain``: one producer with the sink's settings (``partitioner=murmur2_random``,
  ``enable.idempotence=true``, ``delivery.report.only.error=true``): the columns taken out
  with ``to_pylist``, ``produce_batch`` of 10,000-record lists of dicts, then ``flush``;
- ``plain-txn``: the same in one transaction (``transactional.id``, ``init_transactions``,
  ``begin_transaction``, ... ``commit_transaction``);
- ``at-least-once``: a ``MemoryStream`` holding the table in 10 parts into ``format("kafka")``
  with the available-now trigger (one batch of 10 splits, checkpoint and all; the session and
  the stream are made before the timing starts);
- ``exactly-once``: the same with ``exactlyOnce=true`` (one Kafka transaction for the batch).

After one warm-up run: records per second (best of ``--repeat``) and the ratios, at-least-once
against ``plain`` (goal: 80% or more), exactly-once against ``plain`` and ``plain-txn``. Usage::

    .venv/bin/python integration/bench/bench_kafka_sink.py [--records 1000000] [--partitions 4]

The broker: ``MICROBATCH_KAFKA_BOOTSTRAP`` with ``MICROBATCH_SERVICES=external``, else one the
test kit starts for the run (see ``kafka_bench_support.py``). ``--profile`` samples the stacks
of a further run of each sink mode.
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
from kafka_bench_support import (
    Sampler,
    add_volume_arguments,
    best_rate,
    end_offsets,
    kafka_broker,
    keys,
    median_rate,
    produce_batch,
    values,
)
from kafka_bench_support import topic as new_topic

import microbatch as mb
from microbatch_memory import MemoryStream
from microbatch_testkit.services import KafkaService

ROOT = Path(__file__).resolve().parents[2]
CHUNK = 10_000
PARTS = 10
SINK_SETTINGS = {
    "partitioner": "murmur2_random",
    "enable.idempotence": True,
    "delivery.report.only.error": True,
}


def run_plain(service: KafkaService, topic: str, table: pa.Table, *, transactional: bool) -> int:
    """Records the plain loop wrote (the timed part starts with the producer)."""
    from confluent_kafka import Producer

    settings = service.client_config(**SINK_SETTINGS)
    if transactional:
        settings["transactional.id"] = f"bench-{uuid.uuid4().hex[:8]}"
    producer = Producer(settings)
    if transactional:
        producer.init_transactions(60)
        producer.begin_transaction()
    failures: list[Any] = []
    for batch in table.to_batches(max_chunksize=CHUNK):
        messages = [
            {"key": k, "value": v}
            for k, v in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist(), strict=True)
        ]
        produce_batch(producer, topic, messages, -1, failures.append)
    if transactional:
        producer.commit_transaction(120)
    left = producer.flush(120)
    if left or failures:
        raise RuntimeError(f"plain loop: {left} records not delivered, errors {failures[:3]}")
    return table.num_rows


def run_sink(
    service: KafkaService,
    topic: str,
    table: pa.Table,
    *,
    exactly_once: bool,
    work: Path,
    session: mb.Session,
    stream: MemoryStream,
) -> int:
    """Records the sink wrote (the timed part starts with the query)."""
    with tempfile.TemporaryDirectory(dir=work) as checkpoint:
        query = (
            stream.to_frame(session)
            .write_stream.format("kafka")
            .option("kafka.bootstrap.servers", service.bootstrap_servers)
            .option("topic", topic)
            .option("exactlyOnce", str(exactly_once).lower())
            .option("checkpointLocation", checkpoint)
            .trigger(available_now=True)
            .start()
        )
        query.await_termination()
        written = sum(p["numInputRows"] for p in query.recent_progress)
    return int(written)


def sink_input(table: pa.Table, work: Path) -> dict[str, Any]:
    """The session and the stream of ``table`` in ``PARTS`` parts (made before the timing)."""
    session = mb.Session(conf={"noDataProgressEventInterval": "1 hour"})
    stream = MemoryStream(table.schema)
    for part in table.to_batches(max_chunksize=-(-table.num_rows // PARTS)):
        stream.add_data(part)
    stream.to_frame(session).write_stream.format("kafka")  # the plugin found and loaded
    return {"work": work, "session": session, "stream": stream}


CONTENDERS: dict[str, tuple[Callable[..., int], dict[str, bool], bool]] = {
    # kind: (function, its keyword arguments, whether the topic holds exactly its records)
    "plain": (run_plain, {"transactional": False}, True),
    "plain-txn": (run_plain, {"transactional": True}, False),
    "at-least-once": (run_sink, {"exactly_once": False}, True),
    "exactly-once": (run_sink, {"exactly_once": True}, False),
}


def make_table(records: int, value_bytes: int) -> pa.Table:
    return pa.table(
        {
            "key": pa.array(keys(records), pa.binary()),
            "value": pa.array(values(records, value_bytes), pa.binary()),
        }
    )


def child(kind: str, bootstrap: str, topic: str, args: argparse.Namespace) -> None:
    """One run in this (new) process: no producer or connection is left from another run."""
    from microbatch_testkit.services import ExternalKafka

    service = ExternalKafka(bootstrap)
    function, keywords, _ = CONTENDERS[kind]
    import confluent_kafka  # noqa: F401  (imported before the timing, for every contender)

    table = make_table(args.records, args.value_bytes)
    extra = sink_input(table, Path(args.dir)) if function is run_sink else {}
    gc.collect()
    if args.profile:
        with Sampler() as sampler:
            function(service, topic, table, **keywords, **extra)
        sampler.report()
        return
    began = time.perf_counter()
    records = function(service, topic, table, **keywords, **extra)
    print(json.dumps({"records": records, "seconds": time.perf_counter() - began}))


def measure(
    service: KafkaService, kind: str, args: argparse.Namespace, *, profile: bool = False
) -> tuple[int, float]:
    """``(records, seconds)`` of one run of ``kind`` into a new topic, in a child process;
    the topic's offsets are checked against the records reported."""
    with new_topic(service, args.partitions, "bench-sink") as topic:
        command = [sys.executable, __file__, "--child", kind, service.bootstrap_servers, topic]
        command += ["--records", str(args.records), "--value-bytes", str(args.value_bytes)]
        command += ["--dir", args.dir] + (["--profile"] if profile else [])
        result = subprocess.run(command, check=True, capture_output=not profile, text=True)
        if profile:
            return 0, 0.0
        figures = json.loads(result.stdout.strip().splitlines()[-1])
        stored = sum(end_offsets(service, topic, args.partitions).values())
    records, exact = int(figures["records"]), CONTENDERS[kind][2]
    # Transactions add a commit marker per partition and transaction to the offsets.
    if stored < records or (exact and stored != records) or stored > records + 4 * args.partitions:
        raise SystemExit(f"{kind} reported {records:,} records, the topic has {stored:,}")
    return records, float(figures["seconds"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_volume_arguments(parser)
    parser.add_argument("--profile", action="store_true", help="sample a further sink run")
    parser.add_argument("--dir", default=str(ROOT / ".bench-work"))
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    Path(args.dir).mkdir(parents=True, exist_ok=True)
    if args.child:
        kind, bootstrap, topic = args.child
        child(kind, bootstrap, topic, args)
        return

    with kafka_broker() as service:
        measure(service, "plain", args)  # a warm-up run, not counted: a new broker is slower
        runs: dict[str, list[tuple[int, float]]] = {kind: [] for kind in CONTENDERS}
        kinds = list(CONTENDERS)
        for round_ in range(args.repeat):
            # interleaved, so that all see the same machine state, first in turn
            for kind in kinds[round_ % len(kinds) :] + kinds[: round_ % len(kinds)]:
                runs[kind].append(measure(service, kind, args))

        print(
            f"Kafka sink, {args.records:,} records of {args.value_bytes} bytes into "
            f"{args.partitions} partitions, best of {args.repeat}:"
        )
        for kind, results in runs.items():
            print(
                f"  {kind:<14} {best_rate(results):>12,.0f} records/s"
                f"  (median {median_rate(results):,.0f})"
            )
        rate = {kind: best_rate(results) for kind, results in runs.items()}
        print(f"  at-least-once / plain: {rate['at-least-once'] / rate['plain']:.0%} (goal: 80%)")
        print(f"  exactly-once / plain: {rate['exactly-once'] / rate['plain']:.0%}")
        print(f"  exactly-once / plain-txn: {rate['exactly-once'] / rate['plain-txn']:.0%}")

        if args.profile:
            for kind in ("at-least-once", "exactly-once"):
                print(f"{kind}:", flush=True)
                measure(service, kind, args, profile=True)


if __name__ == "__main__":
    main()
