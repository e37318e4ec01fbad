"""Where the Kafka source starts and ends: every startingOffsets form, timestamps, batch reads
with endingOffsets."""

from __future__ import annotations

import time
from typing import Any

import pyarrow as pa
import pytest

from microbatch import OptionError, SourceError
from microbatch.errors import StreamingQueryException


@pytest.fixture
def topic3(make_kafka_topic: Any, produce_each: Any) -> str:
    """A 3-partition topic with offsets 0-4 in every partition."""
    topic = make_kafka_topic(3)
    produce_each(topic, 3, 5)
    return topic


def _root_error(error: BaseException) -> str:
    texts = [str(error)]
    while error.__cause__ is not None:
        error = error.__cause__
        texts.append(str(error))
    return "\n".join(texts)


def test_earliest_reads_everything(
    topic3: str, drain: Any, source_options: Any, offsets_of: Any
) -> None:
    table = drain(source_options(subscribe=topic3, startingOffsets="earliest"))
    assert offsets_of(table) == {p: list(range(5)) for p in range(3)}
    assert sorted(table.column("value").to_pylist())[:2] == [b"0-0", b"0-1"]


def test_latest_is_the_default_and_is_kept_for_the_restart(
    topic3: str, drain: Any, source_options: Any, offsets_of: Any, produce_each: Any
) -> None:
    options = source_options(subscribe=topic3)
    assert drain(options).num_rows == 0  # the start is taken now, at the end, and kept
    produce_each(topic3, 3, 2, first=5)
    table = drain(options)  # same checkpoint
    assert offsets_of(table) == {p: [5, 6] for p in range(3)}


def test_json_offsets_with_earliest_latest_and_exact(
    topic3: str, drain: Any, source_options: Any, offsets_of: Any
) -> None:
    starting = f'{{"{topic3}": {{"0": -2, "1": -1, "2": 3}}}}'
    table = drain(source_options(subscribe=topic3, startingOffsets=starting))
    assert offsets_of(table) == {0: [0, 1, 2, 3, 4], 2: [3, 4]}


def test_json_offsets_must_name_every_partition(
    topic3: str, drain: Any, source_options: Any
) -> None:
    starting = f'{{"{topic3}": {{"0": 1, "1": 2}}}}'
    with pytest.raises((StreamingQueryException, SourceError)) as caught:
        drain(source_options(subscribe=topic3, startingOffsets=starting))
    text = _root_error(caught.value)
    assert "If startingOffsets contains specific offsets, you must specify all TopicPartitions" in (
        text
    )
    assert f"Assigned: [{topic3}-0, {topic3}-1, {topic3}-2]" in text


def test_bad_json_offsets_are_option_errors(drain: Any, source_options: Any) -> None:
    with pytest.raises(OptionError, match=r"Expected e\.g\."):
        drain(source_options(subscribe="t", startingOffsets='{"t": 3}'))


def _timestamped(make_kafka_topic: Any, produce: Any) -> tuple[str, int]:
    """A 2-partition topic: partition p has offsets 0-4 with timestamps base + 1000 * i."""
    topic = make_kafka_topic(2)
    base = int(time.time() * 1000) - 60_000
    produce(
        topic,
        (
            {"partition": p, "value": b"%d-%d" % (p, i), "timestamp": base + 1000 * i}
            for p in range(2)
            for i in range(5)
        ),
    )
    return topic, base


def test_starting_timestamp(
    make_kafka_topic: Any, produce: Any, drain: Any, source_options: Any, offsets_of: Any
) -> None:
    topic, base = _timestamped(make_kafka_topic, produce)
    table = drain(source_options(subscribe=topic, startingTimestamp=str(base + 2500)))
    assert offsets_of(table) == {0: [3, 4], 1: [3, 4]}
    stamps = table.column("timestamp").cast(pa.int64()).to_pylist()
    assert min(stamps) == (base + 3000) * 1000
    assert set(table.column("timestampType").to_pylist()) == {0}  # CreateTime


def test_starting_timestamp_must_be_a_number(drain: Any, source_options: Any) -> None:
    with pytest.raises(OptionError, match="Expected a single long value, got soon"):
        drain(source_options(subscribe="t", startingTimestamp="soon"))


def test_starting_offsets_by_timestamp_and_its_strategy(
    make_kafka_topic: Any, produce: Any, drain: Any, source_options: Any, offsets_of: Any
) -> None:
    topic, base = _timestamped(make_kafka_topic, produce)
    by_time = f'{{"{topic}": {{"0": {base + 1000}, "1": {base + 3999}}}}}'
    table = drain(source_options(subscribe=topic, startingOffsetsByTimestamp=by_time))
    assert offsets_of(table) == {0: [1, 2, 3, 4], 1: [4]}

    too_late = f'{{"{topic}": {{"0": {base + 1000}, "1": {base + 99_000}}}}}'
    with pytest.raises((StreamingQueryException, SourceError)) as caught:
        drain(
            source_options(subscribe=topic, startingOffsetsByTimestamp=too_late),
            checkpoint="strict",
        )
    assert (
        f"No offset matched from request of topic-partition {topic}-1 and timestamp "
        f"{base + 99_000}." in _root_error(caught.value)
    )
    table = drain(
        source_options(
            subscribe=topic,
            startingOffsetsByTimestamp=too_late,
            startingOffsetsByTimestampStrategy="latest",
        ),
        checkpoint="lenient",
    )
    assert offsets_of(table) == {0: [1, 2, 3, 4]}  # partition 1 starts at its latest

    partial = f'{{"{topic}": {{"0": {base}}}}}'
    with pytest.raises((StreamingQueryException, SourceError)) as caught:
        drain(
            source_options(subscribe=topic, startingOffsetsByTimestamp=partial),
            checkpoint="partial",
        )
    assert "Partitions specified for Kafka timestamp based start offsets don't match" in (
        _root_error(caught.value)
    )


def test_batch_reads_default_to_everything(
    topic3: str, drain: Any, source_options: Any, offsets_of: Any
) -> None:
    table = drain.session.read.format("kafka").options(**source_options(subscribe=topic3)).load()
    assert offsets_of(table) == {p: list(range(5)) for p in range(3)}


def test_batch_reads_with_ending_offsets(
    topic3: str, drain: Any, source_options: Any, offsets_of: Any
) -> None:
    options = source_options(
        subscribe=topic3,
        startingOffsets=f'{{"{topic3}": {{"0": 1, "1": -2, "2": 0}}}}',
        endingOffsets=f'{{"{topic3}": {{"0": 3, "1": -1, "2": 0}}}}',
    )
    table = drain.session.read.format("kafka").options(**options).load()
    assert offsets_of(table) == {0: [1, 2], 1: [0, 1, 2, 3, 4]}


def test_batch_read_offset_errors(topic3: str, drain: Any, source_options: Any) -> None:
    read = drain.session.read.format("kafka")
    with pytest.raises(OptionError, match="starting offset can't be latest for batch queries"):
        read.options(**source_options(subscribe=topic3, startingOffsets="latest")).load()
    with pytest.raises(OptionError, match="ending offset can't be earliest for batch queries"):
        read.options(**source_options(subscribe=topic3, endingOffsets="earliest")).load()
    missing = source_options(subscribe=topic3, endingOffsets=f'{{"{topic3}": {{"0": 3}}}}')
    with pytest.raises(SourceError, match="you must specify all TopicPartitions"):
        drain.session.read.format("kafka").options(**missing).load()


def test_streams_refuse_ending_offsets(topic3: str, drain: Any, source_options: Any) -> None:
    with pytest.raises(OptionError, match="ending offset not valid in streaming queries"):
        drain(source_options(subscribe=topic3, endingOffsets="latest"))
