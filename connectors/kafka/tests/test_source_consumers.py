"""Split reads borrow pooled consumers: the next range of a partition needs no new consumer
and no seek, other positions still read exactly their range."""

from __future__ import annotations

from typing import Any

import microbatch as mb
from microbatch_kafka._consumers import POOL
from microbatch_kafka._split_reader import KafkaSplit
from microbatch_kafka.source import KafkaSource


def _offsets(split_reader: Any, split: KafkaSplit) -> list[int]:
    return [o for b in split_reader.read(split) for o in b.column("offset").to_pylist()]


def test_consecutive_ranges_reuse_one_consumer(
    make_kafka_topic: Any, produce: Any, source_options: Any
) -> None:
    topic = make_kafka_topic(2)
    produce(topic, [{"partition": p, "value": b"%d" % i} for p in (0, 1) for i in range(30)])
    raw = source_options(subscribe=topic)
    source = KafkaSource(KafkaSource.options.parse(raw, connector="kafka"))
    reader = source.stream_reader(mb.ReadContext(schema=source.schema(), query_id="pool"))
    try:
        split_reader = reader.split_reader()
        opened = POOL.opened
        assert _offsets(split_reader, KafkaSplit(topic, 0, 0, 10)) == list(range(10))
        assert POOL.opened == opened + 1
        for first in (10, 20):  # where the last read ended: the same consumer, no seek
            assert _offsets(split_reader, KafkaSplit(topic, 0, first, first + 10)) == list(
                range(first, first + 10)
            )
        assert POOL.opened == opened + 1
        # another partition, and going back: read exactly, with a consumer of their own
        assert _offsets(split_reader, KafkaSplit(topic, 1, 5, 7)) == [5, 6]
        assert _offsets(split_reader, KafkaSplit(topic, 0, 3, 4)) == [3]
        assert _offsets(split_reader, KafkaSplit(topic, 1, 7, 30)) == list(range(7, 30))
        assert POOL.opened == opened + 3
        assert POOL.idle_count(reader.settings) == 3
    finally:
        reader.stop()
    assert POOL.idle_count(reader.settings) == 0  # stop() closes this query's consumers


def test_idle_consumers_stop_fetching(
    make_kafka_topic: Any, produce_each: Any, source_options: Any
) -> None:
    """Consumers parked mid-range are unassigned, at most one stays assigned per partition
    (at the batch's end), and those are paused once the query has been idle a moment."""
    import time

    topic = make_kafka_topic(3)
    produce_each(topic, 3, 1000)
    raw = source_options(
        subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger=500, minPartitions=6
    )
    with mb.Session() as session:
        stream = session.read_stream.format("kafka").options(**raw).load()
        query = stream.write_stream.format("noop").start()
        try:
            assert query.process_all_available(timeout=30)
            reader = query._engine.job.reader  # type: ignore[union-attr]
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                states = POOL.idle_states(reader.settings)
                tags = [tag for tag, _paused in states if tag is not None]
                if tags and all(paused for tag, paused in states if tag is not None):
                    break
                time.sleep(0.1)
            assert sorted(tags) == [(topic, p, 1000) for p in range(3)], states
            assert all(paused for tag, paused in states if tag is not None), states
        finally:
            query.stop()
