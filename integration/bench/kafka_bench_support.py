"""What the Kafka benchmarks share: a broker, topics, test records and a sampling profiler.

The broker comes from the test kit's service helpers, as the integration tests get theirs:
``MICROBATCH_KAFKA_BOOTSTRAP`` (with ``MICROBATCH_SERVICES=external``) names a running one,
otherwise Docker or a local broker process is started for the run and stopped after it. With
no provider the benchmark prints why and exits with status 0 (status 1 under
``MICROBATCH_REQUIRE_SERVICES=1``), so that ``make bench`` goes on with the others.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from types import FrameType
from typing import Any

from microbatch_testkit.services import (
    KafkaService,
    ServiceUnavailable,
    require_services,
    start_kafka,
)

VALUE_BYTES = 100


@contextlib.contextmanager
def kafka_broker() -> Iterator[KafkaService]:
    """A running broker for the benchmark (see the module docstring); closed afterwards."""
    try:
        service = start_kafka()
    except ServiceUnavailable as exc:
        if require_services():
            raise
        print(f"skipped: {exc}")
        sys.exit(0)
    try:
        print(f"broker: {service.description}")
        yield service
    finally:
        service.close()


@contextlib.contextmanager
def topic(service: KafkaService, partitions: int, hint: str) -> Iterator[str]:
    """A new topic with ``partitions`` partitions, deleted afterwards."""
    name = service.create_topic(partitions, hint=hint)
    try:
        yield name
    finally:
        with contextlib.suppress(Exception):
            service.delete_topic(name)


def values(count: int, size: int = VALUE_BYTES) -> list[bytes]:
    """``count`` distinct values of ``size`` bytes: random bytes ending in the record's number."""
    filler = os.urandom(size)[: max(size - 10, 0)]
    return [filler + b"%010d" % i for i in range(count)]


def keys(count: int) -> list[bytes]:
    """Keys as the usual keyed topic has them: a few distinct ones (97), repeating."""
    distinct = [b"key-%d" % i for i in range(97)]
    return [distinct[i % 97] for i in range(count)]


def fill(service: KafkaService, name: str, partitions: int, count: int, size: int) -> None:
    """Write ``count`` keyed records of ``size``-byte values, spread evenly over the partitions."""
    from confluent_kafka import Producer

    producer = Producer(
        service.client_config(
            **{
                "linger.ms": 50,
                "batch.size": 1_000_000,
                "queue.buffering.max.messages": 1_000_000,
                "queue.buffering.max.kbytes": 1_000_000,
                "delivery.report.only.error": True,
            }
        )
    )
    failures: list[Any] = []
    all_values = values(count, size)
    all_keys = keys(count)
    chunk = 10_000
    for start in range(0, count, chunk):
        messages = [
            {"key": k, "value": v}
            for k, v in zip(
                all_keys[start : start + chunk], all_values[start : start + chunk], strict=True
            )
        ]
        partition = (start // chunk) % partitions
        produce_batch(producer, name, messages, partition, failures.append)
    left = producer.flush(120)
    if left or failures:
        raise RuntimeError(f"filling {name}: {left} records not delivered, errors {failures[:3]}")


def produce_batch(
    producer: Any,
    name: str,
    messages: list[dict[str, Any]],
    partition: int,
    on_error: Callable[[Any], Any],
) -> None:
    """``producer.produce_batch`` until every message is queued (a full queue is waited out)."""
    from confluent_kafka import KafkaError

    while messages:
        producer.produce_batch(
            name, messages, partition=partition, on_delivery=lambda e, m: on_error(e)
        )
        # produce_batch marks the messages it could not queue with an "_error" entry.
        messages = [m for m in messages if "_error" in m]
        for m in messages:
            error = m.pop("_error")
            if error.code() != KafkaError._QUEUE_FULL:
                raise RuntimeError(f"producing to {name}: {error}")
        if messages:
            producer.poll(0.05)
    producer.poll(0)


def end_offsets(service: KafkaService, name: str, partitions: int) -> dict[int, int]:
    """The high watermark of each partition."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(service.client_config(**{"group.id": f"bench-{uuid.uuid4().hex[:8]}"}))
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(name, p), timeout=30)[1]
            for p in range(partitions)
        }
    finally:
        consumer.close()


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """The ``fraction`` percentile (nearest rank) of values sorted ascending."""
    if not sorted_values:
        return float("nan")
    rank = max(1, int(-(-fraction * len(sorted_values) // 1)))  # ceil, at least the first
    return sorted_values[min(rank, len(sorted_values)) - 1]


def best_rate(runs: Sequence[tuple[int, float]]) -> float:
    """The best records per second over ``(records, seconds)`` runs."""
    return max(records / seconds for records, seconds in runs)


def median_rate(runs: Sequence[tuple[int, float]]) -> float:
    return statistics.median(records / seconds for records, seconds in runs)


def add_volume_arguments(parser: argparse.ArgumentParser) -> None:
    """``--records``, ``--value-bytes``, ``--partitions`` and ``--repeat`` of a throughput
    benchmark."""
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)


def add_source_option_argument(parser: argparse.ArgumentParser) -> None:
    """``--option NAME=VALUE`` (repeatable): further options of the Kafka source, as
    ``(name, value)`` pairs in ``args.option``."""
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        type=lambda text: tuple(text.split("=", 1)),
        help="a further source option NAME=VALUE (repeatable), e.g. kafka.fetch.wait.max.ms=10",
    )


class Sampler:
    """A sampling profiler over every thread of this process (``--profile``).

    Every ``interval`` seconds it records each thread's Python stack; :meth:`report` prints the
    functions that were running (self) and those on the stack (inclusive), as shares of the
    samples. Threads that wait in C (``consume()``, a lock, ``sleep``) still count as samples
    of the function that called it, which is what the benchmark wants to see.
    """

    def __init__(self, interval: float = 0.001, skip: tuple[str, ...] = ()) -> None:
        self.interval = interval
        self.skip = skip
        """Names of threads not sampled (a baseline's own thread)."""
        self.own: collections.Counter[str] = collections.Counter()
        self.inclusive: collections.Counter[str] = collections.Counter()
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-sampler", daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        me = threading.get_ident()
        while not self._stop.wait(self.interval):
            skipped = {t.ident for t in threading.enumerate() if t.name in self.skip}
            for ident, frame in sys._current_frames().items():
                if ident == me or ident in skipped:
                    continue
                self._record(frame)

    def _record(self, frame: FrameType | None) -> None:
        names: list[str] = []
        while frame is not None:
            code = frame.f_code
            names.append(f"{_short(code.co_filename)}:{code.co_name}")
            frame = frame.f_back
        if not names or _idle(names[0]):
            return
        self.samples += 1
        self.own[names[0]] += 1
        for name in set(names):
            self.inclusive[name] += 1

    def report(self, top: int = 25, match: Callable[[str], bool] = lambda name: True) -> None:
        total = max(self.samples, 1)
        print(f"profile: {self.samples} busy samples of every {self.interval * 1000:.0f} ms")
        print("  self (the function running):")
        for name, count in self.own.most_common(top):
            if match(name):
                print(f"    {count / total:6.1%}  {name}")
        print("  inclusive (on the stack):")
        for name, count in self.inclusive.most_common(top * 3):
            if match(name) and count / total >= 0.01:
                print(f"    {count / total:6.1%}  {name}")


def _short(filename: str) -> str:
    for marker in ("/site-packages/", "/src/", "/core/", "/lib/python3"):
        if marker in filename:
            return filename.split(marker, 1)[1]
    return os.path.basename(filename)


_IDLE = (
    "threading.py:wait",
    "threading.py:_wait_for_tstate_lock",
    "queue.py:get",
    "selectors.py:select",
)


def _idle(innermost: str) -> bool:
    """Threads parked waiting for work (pool workers, the idle engine) are not samples."""
    return innermost.endswith(_IDLE) or innermost.endswith(":_worker")


def wall_ms() -> float:
    return time.time_ns() / 1e6
