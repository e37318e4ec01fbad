"""The parts of ``foreachBatch``, ``foreach`` and ``noop`` are written in a spawned process from
pickled part writers, reading the memory source's splits there from a pickled split reader;
each batch commits in this process.

``foreach`` pickles the user's writer with its part writer, as Spark pickles it to executors:
``open``/``process``/``close`` then run in the worker process.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
from pathlib import Path
from types import ModuleType
from typing import Any

import pyarrow as pa
import pytest

from microbatch import ReadAllAvailable, ReadContext, StreamWriter, WriteContext
from microbatch_foreachbatch import ForeachBatchSink, ForeachSink, NoopSink, RowsProcessed
from microbatch_testkit import read_elsewhere, write_batch_elsewhere

memory = pytest.importorskip("microbatch_memory")

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])


@pytest.fixture
def module(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The module of the foreach writers, importable in the spawned processes too."""
    monkeypatch.syspath_prepend(str(Path(__file__).parent))  # spawned processes inherit it
    return importlib.import_module("_foreachbatch_spawn")


def run_batches(writer: StreamWriter) -> list[list[Any]]:
    """Batch 0 holds the first two ``add_data`` calls (ids 1, 2 and an empty one), batch 1 the
    third (id 3). Each split is read and written in a worker; each batch commits here. Returns
    the commit messages of each batch."""
    stream = memory.MemoryStream(SCHEMA)
    stream.add_data([{"id": 1, "name": "a"}, {"id": 2, "name": None}])
    stream.add_data([])
    options = memory.MemoryStreamSource.options.parse({"stream": stream}, connector="memory")
    source = memory.MemoryStreamSource(options)
    reader = source.stream_reader(ReadContext(schema=source.schema()))
    committed: list[list[Any]] = []
    start = reader.initial_offset()
    for batch_id in range(2):
        end = reader.latest_offset(start, ReadAllAvailable())
        parts = read_elsewhere(reader, start, end)
        committed.append(write_batch_elsewhere(writer, SCHEMA, parts, batch_id, "q"))
        start = end
        stream.add_data([{"id": 3, "name": "c"}])
    writer.stop()
    reader.stop()
    return committed


def test_foreach_batch_parts_written_in_a_spawned_process() -> None:
    calls: list[tuple[int, list[int]]] = []

    def record(batch: pa.Table, batch_id: int) -> None:
        calls.append((batch_id, batch.column("id").to_pylist()))

    options = ForeachBatchSink.options.parse({"function": record}, connector="foreachBatch")
    writer = ForeachBatchSink(options).stream_writer(WriteContext(schema=SCHEMA, query_id="q"))
    run_batches(writer)
    assert calls == [(0, [1, 2]), (1, [3])]  # the function runs here, at commit


def test_foreach_writer_runs_in_a_spawned_process(module: ModuleType, tmp_path: Path) -> None:
    options = ForeachSink.options.parse(
        {"writer": module.FileRowWriter(str(tmp_path))}, connector="foreach"
    )
    writer = ForeachSink(options).stream_writer(WriteContext(schema=SCHEMA, query_id="q"))
    committed = run_batches(writer)
    assert committed == [[RowsProcessed(2), RowsProcessed(0)], [RowsProcessed(1)]]
    files = sorted(path.name for path in tmp_path.iterdir())
    assert files == ["part-0-0.jsonl", "part-0-1.jsonl", "part-1-0.jsonl"]  # open() per split
    records = [
        json.loads(line) for name in files for line in (tmp_path / name).read_text().splitlines()
    ]
    assert [(r["epoch"], r["partition"], r["row"]["id"]) for r in records] == [
        (0, 0, 1),
        (0, 0, 2),
        (1, 0, 3),
    ]
    assert {r["pid"] for r in records}.isdisjoint({os.getpid()})


def test_foreach_function_runs_in_a_spawned_process(module: ModuleType, tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    function = functools.partial(module.append_row, str(path))
    options = ForeachSink.options.parse({"writer": function}, connector="foreach")
    writer = ForeachSink(options).stream_writer(WriteContext(schema=SCHEMA))
    run_batches(writer)
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert sorted(r["row"]["id"] for r in records) == [1, 2, 3]
    assert {r["pid"] for r in records}.isdisjoint({os.getpid()})


def test_noop_parts_drained_in_a_spawned_process() -> None:
    writer = NoopSink(NoopSink.options.parse({}, connector="noop")).stream_writer(
        WriteContext(schema=SCHEMA)
    )
    committed = run_batches(writer)
    assert committed == [[RowsProcessed(2), RowsProcessed(0)], [RowsProcessed(1)]]
