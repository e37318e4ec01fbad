"""End-to-end latency: Kafka source to ``foreach_batch``, default trigger, against a plain consumer.

A producer in a child process sends 1,000 records a second (``linger.ms=0``), each value
starting with its send time (``time.time_ns()``, 19 digits) and padded to 100 bytes, into a
new 3-partition topic for ``--seconds``. Two readers read it at the same time, from its end:

- ``plain``: one confluent-kafka consumer assigned every partition, ``poll(0.1)`` in a loop in
  a child process of its own (so that it never waits for the query's threads to release the
  GIL; ``consume(n, timeout)`` would wait for ``n`` records or the timeout); a record's arrival
  is when ``poll`` returned it: what the producer, the broker and the client take;
- ``microbatch``: ``format("kafka")`` (``startingOffsets=latest``, the default) into
  ``foreach_batch`` with the default trigger; a record's arrival is when the function received
  its batch.

Reading at the same time makes the plain consumer a baseline of the same moments: on a busy
machine the producer and the broker are slow at times, for both readers alike. After a first
run that is not measured (``--warmup-seconds``: a new broker is slow at first), ``--repeat``
runs. Latency = arrival - send time over the records sent after the first ``--warmup``
seconds of a run: p50, p99 and the maximum in milliseconds, for each reader, and what
microbatch adds record by record (its arrival minus the plain consumer's), per run and as the
medians of the runs (goal for microbatch: p50 under 10 ms, p99 under 50 ms). Usage::

    .venv/bin/python integration/bench/bench_kafka_latency.py [--seconds 10] [--rate 1000]

The broker: ``MICROBATCH_KAFKA_BOOTSTRAP`` with ``MICROBATCH_SERVICES=external``, else one the
test kit starts for the run (see ``kafka_bench_support.py``). ``--profile`` samples the stacks
of each run (the sampler costs latency itself: read its figures apart).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
from kafka_bench_support import Sampler, add_source_option_argument, kafka_broker, percentile
from kafka_bench_support import topic as new_topic

import microbatch as mb
from microbatch_testkit.services import KafkaService

ROOT = Path(__file__).resolve().parents[2]
STAMP_DIGITS = 19


# -- the producer (a child process, so that it never waits for this one's GIL) ---------------
def produce(bootstrap: str, topic: str, rate: float, seconds: float, size: int) -> None:
    """Send ``rate`` records a second for ``seconds``, each value starting with its send time;
    print how many were sent."""
    from confluent_kafka import Producer

    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 0, "delivery.report.only.error": True}
    )
    producer.list_topics(timeout=30)  # connected before the first record
    padding = b"x" * max(size - STAMP_DIGITS, 0)
    interval = 1.0 / rate
    sent = 0
    began = time.perf_counter()
    due = began
    while due - began < seconds:
        pause = due - time.perf_counter()
        if pause > 0:
            time.sleep(pause)
        producer.produce(topic, b"%019d" % time.time_ns() + padding)
        producer.poll(0)
        sent += 1
        due += interval
    left = producer.flush(30)
    print(sent - left)


def start_producer(
    service: KafkaService, topic: str, rate: float, seconds: float, size: int
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            __file__,
            "--produce",
            service.bootstrap_servers,
            topic,
            str(rate),
            str(seconds),
            str(size),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )


def sent_count(producer: subprocess.Popen[str]) -> int:
    out, _ = producer.communicate(timeout=120)
    if producer.returncode != 0:
        raise SystemExit(f"the producer failed with status {producer.returncode}")
    return int(out.strip().splitlines()[-1])


# -- the contenders ---------------------------------------------------------------------------
class Arrivals:
    """``(sent_ns, arrived_ns)`` of every record received, from any thread."""

    def __init__(self) -> None:
        self.samples: list[tuple[int, int]] = []
        self.batches = 0
        self._lock = threading.Lock()

    def add(self, values: list[bytes], arrived: int) -> None:
        stamps = [(int(v[:STAMP_DIGITS]), arrived) for v in values]
        with self._lock:
            self.samples.extend(stamps)
            self.batches += 1

    def __len__(self) -> int:
        with self._lock:
            return len(self.samples)


def wait_for(arrivals: Arrivals, count: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while len(arrivals) < count and time.monotonic() < deadline:
        time.sleep(0.05)


def consume(bootstrap: str, topic: str, partitions: int, expected: int, timeout: float) -> None:
    """The plain consumer (a child process): assigned at the end of every partition, it prints
    ``ready``, then records when ``poll`` returns each record until ``expected`` arrived or
    ``timeout`` seconds passed, and prints ``[[sent_ns, arrived_ns], ...]`` as JSON."""
    from confluent_kafka import OFFSET_END, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-latency-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_END) for p in range(partitions)])
    consumer.poll(0.5)  # fetching at the end before anything is sent
    print("ready", flush=True)
    samples: list[tuple[int, int]] = []
    deadline = time.monotonic() + timeout
    while len(samples) < expected and time.monotonic() < deadline:
        message = consumer.poll(0.1)
        arrived = time.time_ns()
        if message is not None and message.error() is None:
            samples.append((int(message.value()[:STAMP_DIGITS]), arrived))
    consumer.close()
    print(json.dumps(samples))


class PlainConsumer:
    """The plain consumer in a process of its own, so that it never waits for the query's
    Python threads (the GIL) in this one."""

    def __init__(self, service: KafkaService, topic: str, partitions: int, expected: int) -> None:
        self._process = subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--consume",
                service.bootstrap_servers,
                topic,
                str(partitions),
                str(expected),
                "120",
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._process.stdout is not None
        if self._process.stdout.readline().strip() != "ready":
            raise SystemExit("the plain consumer did not start")

    def arrivals(self) -> Arrivals:
        """Every record it received (waits for it to end)."""
        out, _ = self._process.communicate(timeout=180)
        if self._process.returncode != 0:
            raise SystemExit(f"the plain consumer failed with status {self._process.returncode}")
        arrivals = Arrivals()
        arrivals.samples = [(int(a), int(b)) for a, b in json.loads(out.strip().splitlines()[-1])]
        return arrivals


def run(
    service: KafkaService, topic: str, partitions: int, args: argparse.Namespace
) -> tuple[Arrivals, Arrivals, int, list[Any]]:
    """One run: the query and the plain consumer read ``topic`` while the producer writes it.
    Returns the arrivals of both, the records sent and the query's progress."""
    arrivals = Arrivals()

    def function(table: pa.Table, batch_id: int) -> None:
        arrived = time.time_ns()
        if table.num_rows:
            arrivals.add(table.column("value").to_pylist(), arrived)

    session = mb.Session(conf={"noDataProgressEventInterval": "1 hour"})
    expected = int(args.rate * args.seconds)
    plain = PlainConsumer(service, topic, partitions, expected)
    with tempfile.TemporaryDirectory(dir=args.dir) as checkpoint:
        query = (
            session.read_stream.format("kafka")
            .option("kafka.bootstrap.servers", service.bootstrap_servers)
            .option("subscribe", topic)
            .options(**dict(args.option))
            .load()
            .write_stream.foreach_batch(function)
            .option("checkpointLocation", checkpoint)
            .start()
        )
        try:
            if not query.process_all_available(60):
                raise SystemExit("the query did not reach the end of the topic in 60 s")
            time.sleep(1.0)  # both idle at the end before anything is sent
            producer = start_producer(service, topic, args.rate, args.seconds, args.value_bytes)
            sampler: Any = Sampler() if args.profile else contextlib.nullcontext()
            with sampler:
                sent = sent_count(producer)
                wait_for(arrivals, sent, 30)
                plain_arrivals = plain.arrivals()
        finally:
            query.stop()
        progress = query.recent_progress
    session.stop()
    if isinstance(sampler, Sampler):
        sampler.report()
    return arrivals, plain_arrivals, sent, progress


def latencies(arrivals: Arrivals, warmup: float) -> list[float]:
    """Sorted latencies in ms of the records sent after the first ``warmup`` seconds."""
    samples = sorted(arrivals.samples)
    if not samples:
        return []
    first = samples[0][0]
    return sorted(
        (arrived - sent_ns) / 1e6 for sent_ns, arrived in samples if sent_ns - first >= warmup * 1e9
    )


def added(engine: Arrivals, plain: Arrivals, warmup: float) -> list[float]:
    """Sorted per-record differences in ms: microbatch's arrival minus the plain consumer's."""
    seen = dict(plain.samples)
    samples = sorted(engine.samples)
    if not samples:
        return []
    first = samples[0][0]
    return sorted(
        (arrived - seen[sent_ns]) / 1e6
        for sent_ns, arrived in samples
        if sent_ns in seen and sent_ns - first >= warmup * 1e9
    )


def describe(kept: list[float]) -> str:
    if not kept:
        return "nothing measured"
    return (
        f"p50 {percentile(kept, 0.50):7.2f} ms  p99 {percentile(kept, 0.99):7.2f} ms"
        f"  max {kept[-1]:7.2f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rate", type=float, default=1000.0, help="records a second")
    parser.add_argument(
        "--warmup", type=float, default=1.0, help="seconds of each run not measured"
    )
    parser.add_argument(
        "--warmup-seconds", type=float, default=3.0, help="a first run, not measured"
    )
    parser.add_argument("--repeat", type=int, default=2, help="measured runs")
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="sample the microbatch run")
    add_source_option_argument(parser)
    parser.add_argument("--dir", default=str(ROOT / ".bench-work"))
    parser.add_argument("--produce", nargs=5, help=argparse.SUPPRESS)
    parser.add_argument("--consume", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.consume:
        bootstrap, topic, partitions, expected, timeout = args.consume
        consume(bootstrap, topic, int(partitions), int(expected), float(timeout))
        return
    if args.produce:
        bootstrap, topic, rate, seconds, size = args.produce
        produce(bootstrap, topic, float(rate), float(seconds), int(size))
        return
    Path(args.dir).mkdir(parents=True, exist_ok=True)

    figures: dict[str, list[list[float]]] = {"plain": [], "microbatch": [], "added": []}
    progress: list[Any] = []
    with kafka_broker() as service:
        if args.warmup_seconds > 0:  # not measured: a new broker is slow at first
            with new_topic(service, args.partitions, "bench-latency") as topic:
                warm = argparse.Namespace(**{**vars(args), "seconds": args.warmup_seconds})
                run(service, topic, args.partitions, warm)
        for index in range(args.repeat):
            with new_topic(service, args.partitions, "bench-latency") as topic:
                engine, plain, sent, progress = run(service, topic, args.partitions, args)
            figures["plain"].append(latencies(plain, args.warmup))
            figures["microbatch"].append(latencies(engine, args.warmup))
            figures["added"].append(added(engine, plain, args.warmup))
            print(
                f"run {index + 1}: {len(engine):,} (microbatch) and {len(plain):,} (plain) of "
                f"{sent:,} records received, {engine.batches:,} batches",
                flush=True,
            )

    print(
        f"latency, {args.rate:,.0f} records/s for {args.seconds:.0f} s into {args.partitions} "
        f"partitions, {args.repeat} runs (first {args.warmup:.0f} s of each not measured):"
    )
    labels = {
        "plain": "plain",
        "microbatch": "microbatch",
        "added": "microbatch - plain, record by record",
    }
    for kind, runs in figures.items():
        for index, kept in enumerate(runs, 1):
            print(f"  {labels[kind]}, run {index}: {describe(kept)}")
    for kind, runs in figures.items():
        p50 = statistics.median(percentile(kept, 0.50) for kept in runs)
        p99 = statistics.median(percentile(kept, 0.99) for kept in runs)
        print(f"  {labels[kind]}, median of the runs: p50 {p50:7.2f} ms  p99 {p99:7.2f} ms")
    print("  goal for microbatch: p50 under 10 ms, p99 under 50 ms")
    batches = [p for p in progress if p["numInputRows"]]
    if batches:
        names = sorted({name for p in batches for name in p["durationMs"]})
        medians = ", ".join(
            f"{name} {statistics.median(p['durationMs'].get(name, 0) for p in batches):.0f}"
            for name in names
        )
        rows = statistics.mean(p["numInputRows"] for p in batches)
        print(
            f"  last run's last {len(batches)} batches: {rows:.1f} rows each; median ms: {medians}"
        )


if __name__ == "__main__":
    main()
