from __future__ import annotations

import pickle
import time
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pytest

from microbatch import ReadAllAvailable, ReadContext, ReadMaxRows
from microbatch.errors import OptionError, SourceError
from microbatch_rate import RateMicroBatchReader, RateMicroBatchSource
from microbatch_rate._arrays import SCHEMA


def make_source(streaming: bool = True, **options: Any) -> RateMicroBatchSource:
    parsed = RateMicroBatchSource.options.parse(options, connector="rate-micro-batch")
    return RateMicroBatchSource(parsed, streaming=streaming)


def make_micro(streaming: bool = True, **options: Any) -> RateMicroBatchReader:
    """The stream reader of one run (or one batch read) of a rate-micro-batch source."""
    source = make_source(streaming, **options)
    return source.stream_reader(ReadContext(schema=source.schema(), streaming=streaming))


def read_splits(source: RateMicroBatchReader, splits: list[Any]) -> list[pa.RecordBatch]:
    split_reader = source.split_reader()
    return [batch for split in splits for batch in split_reader.read(split)]


def read_batch(source: RateMicroBatchReader, start: Any, end: Any) -> pa.Table:
    batches = read_splits(source, source.partitions(start, end))
    return pa.Table.from_batches(batches, schema=SCHEMA).sort_by("value")


def millis(value: int) -> datetime:
    return datetime.fromtimestamp(value / 1000, UTC)


def test_rows_per_batch_is_required() -> None:
    with pytest.raises(OptionError, match="missing required option 'rowsPerBatch'"):
        make_micro()
    with pytest.raises(OptionError, match="rowsPerBatch"):
        make_micro(rowsPerBatch=0)


@pytest.mark.parametrize(
    ("name", "value"),
    [("startTimestamp", -1), ("advanceMillisPerBatch", -5), ("numPartitions", 0)],
)
def test_negative_settings_are_refused(name: str, value: int) -> None:
    with pytest.raises(OptionError, match=name):
        RateMicroBatchSource.options.parse({"rowsPerBatch": 1, name: value}, connector="rate")


def test_describe_and_capabilities() -> None:
    source = make_source(rowsPerBatch=10, numPartitions=2, startTimestamp=5)
    assert source.describe() == (
        "RateMicroBatchSource[rowsPerBatch=10, numPartitions=2, startTimestamp=5, "
        "advanceMillisPerBatch=1000]"
    )
    assert RateMicroBatchSource.capabilities.available_now
    assert RateMicroBatchSource.capabilities.replayable
    assert source.schema().names == ["timestamp", "value"]


def test_each_trigger_advances_exactly_one_batch() -> None:
    source = make_micro(rowsPerBatch=10, startTimestamp=1_000, advanceMillisPerBatch=250)
    start = source.initial_offset()
    assert start == {"offset": 0, "timestamp": 1_000}
    assert source.default_read_limit() == ReadMaxRows(10)
    first = source.latest_offset(start, source.default_read_limit())
    assert first == {"offset": 10, "timestamp": 1_250}
    assert source.latest_offset(first, ReadAllAvailable()) == {"offset": 20, "timestamp": 1_500}
    assert source.latest_offset(first, ReadMaxRows(3)) == {"offset": 20, "timestamp": 1_500}


def test_batch_k_holds_its_values_and_one_timestamp() -> None:
    source = make_micro(
        rowsPerBatch=4, numPartitions=3, startTimestamp=60_000, advanceMillisPerBatch=500
    )
    offset = source.initial_offset()
    for batch in range(3):
        end = source.latest_offset(offset, ReadAllAvailable())
        table = read_batch(source, offset, end)
        assert table.column("value").to_pylist() == list(range(4 * batch, 4 * batch + 4))
        assert set(table.column("timestamp").to_pylist()) == {millis(60_000 + 500 * batch)}
        offset = end


def test_partitions_take_every_nth_value_from_the_batch_start() -> None:
    source = make_micro(rowsPerBatch=7, numPartitions=3)
    splits = source.partitions(
        {"offset": 7, "timestamp": 1_000}, {"offset": 14, "timestamp": 2_000}
    )
    assert pickle.loads(pickle.dumps(splits)) == splits
    per_split = [
        [value for batch in read_splits(source, [split]) for value in batch["value"].to_pylist()]
        for split in splits
    ]
    assert per_split == [[7, 10, 13], [8, 11], [9, 12]]


def test_more_partitions_than_rows_leaves_some_empty() -> None:
    source = make_micro(rowsPerBatch=2, numPartitions=4)
    splits = source.partitions(source.initial_offset(), {"offset": 2, "timestamp": 1_000})
    assert [sum(b.num_rows for b in read_splits(source, [split])) for split in splits] == [
        1,
        1,
        0,
        0,
    ]


def test_replaying_a_batch_gives_identical_rows() -> None:
    start, end = {"offset": 30, "timestamp": 3_000}, {"offset": 40, "timestamp": 4_000}
    first = read_batch(make_micro(rowsPerBatch=10, numPartitions=2), start, end)
    time.sleep(0.01)
    second = read_batch(make_micro(rowsPerBatch=10, numPartitions=2), start, end)
    assert first.equals(second)
    assert first.num_rows == 10


def test_available_now_runs_exactly_one_batch() -> None:
    source = make_micro(rowsPerBatch=5)
    current = {"offset": 15, "timestamp": 3_000}
    source.prepare_available_now()
    target = source.latest_offset(current, source.default_read_limit())
    assert target == {"offset": 20, "timestamp": 4_000}
    assert source.latest_offset(target, source.default_read_limit()) == target
    assert source.latest_offset(target, ReadAllAvailable()) == target


def test_batch_read_returns_one_batch() -> None:
    source = make_micro(streaming=False, rowsPerBatch=6, numPartitions=2, startTimestamp=7)
    start = source.initial_offset()
    end = source.latest_offset(start, ReadAllAvailable())
    table = read_batch(source, start, end)
    assert table.column("value").to_pylist() == list(range(6))
    assert set(table.column("timestamp").to_pylist()) == {millis(7)}


def test_a_million_rows_in_bounded_batches_quickly() -> None:
    source = make_micro(rowsPerBatch=1_000_000, numPartitions=1)
    start = source.initial_offset()
    (split,) = source.partitions(start, source.latest_offset(start, ReadAllAvailable()))
    split_reader = source.split_reader()
    best = float("inf")
    for _ in range(3):
        began = time.perf_counter()
        batches = list(split_reader.read(split))
        best = min(best, time.perf_counter() - began)
    assert max(batch.num_rows for batch in batches) == 65_536
    assert sum(batch.num_rows for batch in batches) == 1_000_000
    assert batches[-1].column("value")[-1].as_py() == 999_999
    assert best < 0.1, f"generating 1M rows took {best * 1000:.1f} ms"


@pytest.mark.parametrize(
    "offset", [{"offset": 1}, {"seconds": 1}, {"offset": True, "timestamp": 0}]
)
def test_foreign_offsets_are_refused(offset: Any) -> None:
    with pytest.raises(SourceError, match="not made by this source"):
        make_micro(rowsPerBatch=1).latest_offset(offset, ReadAllAvailable())


def test_offsets_beyond_int64_are_an_error() -> None:
    source = make_micro(rowsPerBatch=2**62)
    end = source.latest_offset(source.initial_offset(), ReadAllAvailable())
    with pytest.raises(SourceError, match="Integer overflow"):
        source.latest_offset(source.latest_offset(end, ReadAllAvailable()), ReadAllAvailable())


def test_foreign_splits_are_refused() -> None:
    with pytest.raises(SourceError, match=r"not planned by the rate-micro-batch source.*range_end"):
        list(make_micro(rowsPerBatch=1).split_reader().read({"partition": 0}))  # type: ignore[arg-type]
