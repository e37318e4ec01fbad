"""The splits of ``rate`` and ``rate-micro-batch`` read in another process, from pickled split
readers: what a split reader needs travels with it and with the split."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from microbatch import ReadAllAvailable, ReadContext, StateStore, StreamReader
from microbatch_rate import RateMicroBatchSource, RateSource
from microbatch_rate._arrays import SCHEMA
from microbatch_testkit import read_elsewhere

START = 1_700_000_000.5


def sorted_rows(splits: list[list[pa.RecordBatch]]) -> pa.Table:
    batches = [batch for split in splits for batch in split]
    return pa.Table.from_batches(batches, schema=SCHEMA).sort_by("value")


def read_here(reader: StreamReader, start: Any, end: Any) -> pa.Table:
    split_reader = reader.split_reader()
    return sorted_rows([list(split_reader.read(split)) for split in reader.partitions(start, end)])


def test_rate_splits_read_in_a_spawned_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = [START]
    monkeypatch.setattr(RateSource, "clock", lambda: clock[0])
    options = RateSource.options.parse({"rowsPerSecond": 5, "numPartitions": 3}, connector="rate")
    source = RateSource(options)
    reader = source.stream_reader(
        ReadContext(schema=source.schema(), state=StateStore(str(tmp_path)))
    )
    start = reader.initial_offset()
    clock[0] = START + 2.1
    end = reader.latest_offset(start, ReadAllAvailable())
    assert end == {"seconds": 2}
    elsewhere = sorted_rows(read_elsewhere(reader, start, end))
    assert elsewhere.column("value").to_pylist() == list(range(10))
    assert elsewhere.equals(read_here(reader, start, end))


def test_rate_micro_batch_splits_read_in_a_spawned_process() -> None:
    options = RateMicroBatchSource.options.parse(
        {"rowsPerBatch": 100_000, "numPartitions": 2, "startTimestamp": 5_000},
        connector="rate-micro-batch",
    )
    source = RateMicroBatchSource(options)
    reader = source.stream_reader(ReadContext(schema=source.schema()))
    start = reader.latest_offset(reader.initial_offset(), ReadAllAvailable())
    end = reader.latest_offset(start, ReadAllAvailable())
    elsewhere = sorted_rows(read_elsewhere(reader, start, end))
    assert elsewhere.column("value").to_pylist() == list(range(100_000, 200_000))
    assert elsewhere.equals(read_here(reader, start, end))
