"""The splits of ``rate`` and ``rate-micro-batch`` read in another process, from pickled split
readers: what a split reader needs travels with it and with the split."""

from __future__ import annotations

import importlib
import multiprocessing
import os
import pickle
import sys
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

import pyarrow as pa
import pytest

from microbatch import ReadAllAvailable, ReadContext, StateStore, StreamReader
from microbatch_rate import RateMicroBatchSource, RateSource
from microbatch_rate._arrays import SCHEMA

START = 1_700_000_000.5


@pytest.fixture(scope="module")
def worker() -> Iterator[tuple[ProcessPoolExecutor, ModuleType]]:
    """A pool of spawned processes, and the module whose function they run."""
    here = str(Path(__file__).parent)
    sys.path.insert(0, here)  # the spawned processes start with this sys.path
    try:
        module = importlib.import_module("_rate_spawn")
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=2, mp_context=context) as pool:
            yield pool, module
    finally:
        sys.path.remove(here)


def read_elsewhere(
    worker: tuple[ProcessPoolExecutor, ModuleType], reader: StreamReader, start: Any, end: Any
) -> pa.Table:
    pool, module = worker
    payload = pickle.dumps(reader.split_reader())
    futures = [
        pool.submit(module.read_pickled, payload, pickle.dumps(split))
        for split in reader.partitions(start, end)
    ]
    batches: list[pa.RecordBatch] = []
    for future in futures:
        pid, read = future.result(timeout=60)
        assert pid != os.getpid()
        batches += read
    return pa.Table.from_batches(batches, schema=SCHEMA).sort_by("value")


def read_here(reader: StreamReader, start: Any, end: Any) -> pa.Table:
    split_reader = reader.split_reader()
    batches = [b for split in reader.partitions(start, end) for b in split_reader.read(split)]
    return pa.Table.from_batches(batches, schema=SCHEMA).sort_by("value")


def test_rate_splits_read_in_a_spawned_process(
    worker: tuple[ProcessPoolExecutor, ModuleType], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
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
    elsewhere = read_elsewhere(worker, reader, start, end)
    assert elsewhere.column("value").to_pylist() == list(range(10))
    assert elsewhere.equals(read_here(reader, start, end))


def test_rate_micro_batch_splits_read_in_a_spawned_process(
    worker: tuple[ProcessPoolExecutor, ModuleType],
) -> None:
    options = RateMicroBatchSource.options.parse(
        {"rowsPerBatch": 100_000, "numPartitions": 2, "startTimestamp": 5_000},
        connector="rate-micro-batch",
    )
    source = RateMicroBatchSource(options)
    reader = source.stream_reader(ReadContext(schema=source.schema()))
    start = reader.latest_offset(reader.initial_offset(), ReadAllAvailable())
    end = reader.latest_offset(start, ReadAllAvailable())
    elsewhere = read_elsewhere(worker, reader, start, end)
    assert elsewhere.column("value").to_pylist() == list(range(100_000, 200_000))
    assert elsewhere.equals(read_here(reader, start, end))
