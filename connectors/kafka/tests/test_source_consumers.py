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
