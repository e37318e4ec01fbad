"""Rate limits of the Kafka source against a real broker: maxOffsetsPerTrigger with Spark's
arithmetic, available-now, minOffsetsPerTrigger with maxTriggerDelay, minPartitions."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

import microbatch as mb
from microbatch import ReadAllAvailable, ReadContext
from microbatch_kafka.source import KafkaSource

pytest.importorskip("microbatch_memory")

# Backlogs of design §2.1, read with maxOffsetsPerTrigger=100: 12 batches.
BACKLOGS = {0: 1000, 1: 100, 2: 3}
TABLE_ENDS = [
    (90, 9, 1),
    (180, 18, 2),
    (270, 27, 3),
    *[(270 + 90 * k, 27 + 9 * k, 3) for k in range(1, 9)],
    (1000, 100, 3),
]
TABLE_ROWS = [100, 100, 100, *[99] * 8, 11]


def produce(service: Any, topic: str, counts: dict[int, int], tag: str = "r") -> None:
    """Write ``counts[p]`` records to each partition ``p`` (explicit partition), flushed."""
    from confluent_kafka import Producer

    failures: list[Any] = []

    def delivered(error: Any, _message: Any) -> None:
        if error is not None:
            failures.append(error)

    producer = Producer(service.client_config(**{"linger.ms": 5}))
    for partition, count in counts.items():
        for index in range(count):
            value = f"{tag}-{partition}-{index}".encode()
            producer.produce(topic, value=value, partition=partition, on_delivery=delivered)
            if index % 500 == 0:
                producer.poll(0)
    assert producer.flush(30) == 0
    assert not failures, failures


def source_options(service: Any, topic: str, **options: Any) -> dict[str, Any]:
    return {
        "kafka.bootstrap.servers": service.bootstrap_servers,
        "subscribe": topic,
        "startingOffsets": "earliest",
        **options,
    }


def start_query(
    session: mb.Session,
    options: dict[str, Any],
    name: str,
    checkpoint: Path,
    *,
    available_now: bool = False,
) -> mb.StreamingQuery:
    writer = (
        session.read_stream.format("kafka")
        .options(**options)
        .load()
        .write_stream.format("memory")
        .query_name(name)
        .option("checkpointLocation", str(checkpoint))
    )
    if available_now:
        writer = writer.trigger(available_now=True)
    return writer.start()


def batches(query: mb.StreamingQuery) -> list[mb.StreamingQueryProgress]:
    """The progress of each batch that read rows, in order."""
    return [p for p in query.recent_progress if p["numInputRows"] > 0]


def end_offsets(progress: mb.StreamingQueryProgress, topic: str) -> tuple[int, ...]:
    end = progress["sources"][0]["endOffset"]
    assert list(end) == [topic], end
    return tuple(end[topic][str(p)] for p in range(len(end[topic])))


def trigger_time(progress: mb.StreamingQueryProgress) -> float:
    return datetime.fromisoformat(progress["timestamp"]).timestamp()


def wait_for(
    condition: Callable[[], bool], timeout: float = 20.0, query: mb.StreamingQuery | None = None
) -> float:
    """When ``condition()`` held; fails after ``timeout`` seconds, showing ``query``'s state."""
    began = time.monotonic()
    while not condition():
        if time.monotonic() - began > timeout:
            shown = "" if query is None else f": {describe(query)}"
            pytest.fail(f"condition not met within {timeout} s{shown}")
        time.sleep(0.02)
    return time.monotonic()


def describe(query: mb.StreamingQuery) -> str:
    """The query's status, error and last progress records, for a failure message."""
    recent = [
        (p["batchId"], p["numInputRows"], p["sources"][0]["endOffset"])
        for p in query.recent_progress[-5:]
    ]
    return f"status {query.status}, exception {query.exception()!r}, recent progress {recent}"


def finish(query: mb.StreamingQuery, timeout: float = 60.0) -> None:
    assert query.await_termination(timeout=timeout), "the available-now run did not stop"
    assert query.exception() is None


@pytest.fixture
def session() -> Iterator[mb.Session]:
    with mb.Session() as made:
        yield made


class ProduceAfterFirstBatch(mb.StreamingQueryListener):
    """Produces more records when the first batch completes (on the query's thread, so
    while the available-now run is going on)."""

    def __init__(self, action: Callable[[], None]) -> None:
        self.action = action
        self.done = False

    def on_query_progress(self, progress: mb.StreamingQueryProgress) -> None:
        if not self.done and progress["numInputRows"] > 0:
            self.done = True
            self.action()


def test_available_now_drains_skewed_backlogs_in_sparks_twelve_batches(
    kafka_service: Any, make_kafka_topic: Callable[..., str], session: mb.Session, tmp_path: Path
) -> None:
    topic = make_kafka_topic(3)
    produce(kafka_service, topic, BACKLOGS)
    listener = ProduceAfterFirstBatch(lambda: produce(kafka_service, topic, {0: 50}, tag="late"))
    session.streams.add_listener(listener)
    options = source_options(kafka_service, topic, maxOffsetsPerTrigger=100)

    query = start_query(session, options, "skewed", tmp_path / "cp", available_now=True)
    finish(query)
    session.streams.remove_listener(listener)

    assert listener.done
    done = batches(query)
    assert [end_offsets(p, topic) for p in done] == TABLE_ENDS
    assert [p["numInputRows"] for p in done] == TABLE_ROWS
    assert [p["batchId"] for p in done] == list(range(12))
    rows = session.table("skewed")
    assert rows.num_rows == 1103
    late = [v for v in rows.column("value").to_pylist() if v.startswith(b"late")]
    assert late == []  # produced after the run began: not this run's

    # The next run reads the records produced during the first one, and only them.
    query = start_query(session, options, "skewed_next", tmp_path / "cp", available_now=True)
    finish(query)
    done = batches(query)
    assert [end_offsets(p, topic) for p in done] == [(1050, 100, 3)]
    assert [p["batchId"] for p in done] == [12]
    rows = session.table("skewed_next")
    assert rows.num_rows == 50
    assert sorted(rows.column("offset").to_pylist()) == list(range(1000, 1050))
    assert set(rows.column("partition").to_pylist()) == {0}


def test_over_limit_share_rounding_on_the_broker(
    kafka_service: Any, make_kafka_topic: Callable[..., str], session: mb.Session, tmp_path: Path
) -> None:
    # Sizes 1, 1, 1000 with a limit of 10: each small share rounds up, 1 + 1 + 9 = 11 rows.
    topic = make_kafka_topic(3)
    produce(kafka_service, topic, {0: 1, 1: 1, 2: 1000})
    options = source_options(kafka_service, topic, maxOffsetsPerTrigger=10)
    query = start_query(session, options, "over", tmp_path / "cp")
    try:
        wait_for(lambda: len(batches(query)) >= 2, timeout=30)
    finally:
        query.stop()
    first, second = batches(query)[:2]
    assert end_offsets(first, topic) == (1, 1, 9)
    assert first["numInputRows"] == 11
    assert end_offsets(second, topic) == (1, 1, 19)


def test_available_now_is_not_delayed_by_min_offsets(
    kafka_service: Any, make_kafka_topic: Callable[..., str], session: mb.Session, tmp_path: Path
) -> None:
    # The last batch (5 offsets) is below minOffsetsPerTrigger: available-now reads it anyway.
    topic = make_kafka_topic(1)
    produce(kafka_service, topic, {0: 25})
    options = source_options(
        kafka_service,
        topic,
        maxOffsetsPerTrigger=10,
        minOffsetsPerTrigger=8,
        maxTriggerDelay="1h",
    )
    query = start_query(session, options, "not_delayed", tmp_path / "cp", available_now=True)
    finish(query, timeout=30)
    assert [end_offsets(p, topic) for p in batches(query)] == [(10,), (20,), (25,)]
    assert session.table("not_delayed").num_rows == 25


def test_small_backlog_waits_for_max_trigger_delay(
    kafka_service: Any, make_kafka_topic: Callable[..., str], session: mb.Session, tmp_path: Path
) -> None:
    topic = make_kafka_topic(1)
    produce(kafka_service, topic, {0: 10})
    # the delay is long enough that the check below still comes before it on a slow machine
    options = source_options(kafka_service, topic, minOffsetsPerTrigger=100, maxTriggerDelay="6s")
    query = start_query(session, options, "delayed", tmp_path / "cp")
    try:
        # The first trigger of a run fires whatever the backlog.
        wait_for(lambda: session.table("delayed").num_rows == 10)
        produced = time.monotonic()
        produce(kafka_service, topic, {0: 10}, tag="second")
        time.sleep(max(0.0, produced + 1.2 - time.monotonic()))
        assert session.table("delayed").num_rows == 10  # 10 < 100: waits
        arrived = wait_for(lambda: session.table("delayed").num_rows == 20, timeout=20)
    finally:
        query.stop()
    assert query.exception() is None
    first, second = batches(query)
    assert end_offsets(first, topic) == (10,)
    assert end_offsets(second, topic) == (20,)
    # Fired by the delay: about 6 s after the trigger of the first batch, not before.
    assert trigger_time(second) - trigger_time(first) >= 5.9
    assert arrived - produced < 20


def test_big_backlog_fires_at_once(
    kafka_service: Any, make_kafka_topic: Callable[..., str], session: mb.Session, tmp_path: Path
) -> None:
    topic = make_kafka_topic(2)
    options = source_options(kafka_service, topic, minOffsetsPerTrigger=100, maxTriggerDelay="1h")
    query = start_query(session, options, "at_once", tmp_path / "cp")
    try:
        assert query.process_all_available(timeout=30)  # the first trigger: nothing to read
        produce(kafka_service, topic, {0: 5, 1: 5})
        time.sleep(1.0)
        assert session.table("at_once").num_rows == 0  # 10 < 100, and the delay is an hour
        assert batches(query) == []
        produce(kafka_service, topic, {0: 100, 1: 50}, tag="big")
        # A trigger may see the new records in part (partition 0's before partition 1's): it
        # fires once at least 100 new offsets are visible; what it leaves waits for the hour.
        wait_for(lambda: session.table("at_once").num_rows >= 100, timeout=20, query=query)
        time.sleep(0.5)
    finally:
        query.stop()
    assert query.exception() is None
    done = batches(query)
    assert len(done) == 1, [p["numInputRows"] for p in done]
    assert done[0]["numInputRows"] >= 100
    ends = end_offsets(done[0], topic)
    assert ends[0] <= 105 and ends[1] <= 55 and sum(ends) == done[0]["numInputRows"]
    assert session.table("at_once").num_rows == done[0]["numInputRows"]


# --- minPartitions -------------------------------------------------------------------------


def reader_for(session: mb.Session, options: dict[str, Any], tmp_path: Path) -> Any:
    """A stream reader of the Kafka source, made as the engine makes one."""
    from microbatch.state import StateStore

    parsed = KafkaSource.options.parse(options, connector="kafka")
    source = KafkaSource(parsed, user_schema=None, session=session, streaming=True)
    context = ReadContext(
        schema=source.schema(),
        state=StateStore(str(tmp_path / f"state-{uuid.uuid4().hex}")),
        streaming=True,
        query_id=str(uuid.uuid4()),
        session=session,
    )
    return source.stream_reader(context)


@pytest.mark.parametrize(
    ("min_partitions", "sizes"),
    [
        (None, [3, 100, 1000]),
        (3, [3, 100, 1000]),
        (5, [3, 100, 333, 333, 334]),
    ],
)
def test_min_partitions_splits_large_ranges(
    kafka_service: Any,
    make_kafka_topic: Callable[..., str],
    session: mb.Session,
    tmp_path: Path,
    min_partitions: int | None,
    sizes: list[int],
) -> None:
    topic = make_kafka_topic(3)
    produce(kafka_service, topic, BACKLOGS)
    extra = {} if min_partitions is None else {"minPartitions": min_partitions}
    reader = reader_for(session, source_options(kafka_service, topic, **extra), tmp_path)
    try:
        start = reader.initial_offset()
        end = reader.latest_offset(start, ReadAllAvailable())
        assert end == {topic: {"0": 1000, "1": 100, "2": 3}}
        splits = list(reader.partitions(start, end))
        assert len(splits) == len(sizes)
        split_reader = reader.split_reader()
        counts = []
        offsets: list[tuple[int, int]] = []
        for split in splits:
            read = [b for b in split_reader.read(split)]
            counts.append(sum(b.num_rows for b in read))
            for b in read:
                pairs = zip(
                    b.column("partition").to_pylist(), b.column("offset").to_pylist(), strict=True
                )
                offsets += pairs
        assert sorted(counts) == sorted(sizes)
        assert sorted(offsets) == sorted((p, o) for p, n in BACKLOGS.items() for o in range(n))
    finally:
        reader.stop()


def test_min_partitions_in_a_batch_read(
    kafka_service: Any, make_kafka_topic: Callable[..., str], session: mb.Session
) -> None:
    topic = make_kafka_topic(3)
    produce(kafka_service, topic, BACKLOGS)
    table = (
        session.read.format("kafka")
        .options(**source_options(kafka_service, topic, minPartitions=5))
        .load()
    )
    pairs = zip(
        table.column("partition").to_pylist(), table.column("offset").to_pylist(), strict=True
    )
    got = sorted(pairs)
    assert got == sorted((p, o) for p, n in BACKLOGS.items() for o in range(n))
