"""Splits of every file format read, and parts of every file sink written, in other processes.

A split may be read (and a part written) on another machine, from a pickled split reader (part
writer): the pool here starts fresh interpreters (``spawn``) that get nothing but the pickles.
The batch is committed in the test process; the result must equal reading (writing) in
process.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import pickle
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.orc as orc
import pyarrow.parquet as pq
import pytest
from file_connector_helpers import (
    ipc_bytes,
    open_reader,
    read_pickled_split,
    read_range,
    write_pickled_part,
)

import microbatch as mb
from microbatch import PartContext, WriteContext
from microbatch_file.sinks import CsvFileSink, FileSink, JsonFileSink, ParquetFileSink
from microbatch_file.sources import (
    CsvFileSource,
    FileSource,
    JsonFileSource,
    OrcFileSource,
    ParquetFileSource,
    TextFileSource,
)

ROWS = pa.schema([("id", pa.int64()), ("name", pa.string())])


@pytest.fixture(scope="module")
def pool() -> Iterator[ProcessPoolExecutor]:
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=2, mp_context=context) as executor:
        yield executor


def _rows(first: int, count: int) -> list[dict[str, Any]]:
    return [{"id": first + i, "name": f"n{first + i}"} for i in range(count)]


def _json_files(folder: Path) -> None:
    for key, first in ((1, 0), (2, 10)):
        place = folder / f"k={key}"
        place.mkdir(parents=True)
        lines = [json.dumps(row) for row in _rows(first, 5)]
        lines.insert(2, '{"id": "not a number", "name": 3')  # a malformed line
        (place / "part.json").write_text("\n".join(lines) + "\n")


def _csv_files(folder: Path) -> None:
    folder.mkdir()
    for index, first in enumerate((0, 10)):
        body = "".join(f"{r['id']},{r['name']}\n" for r in _rows(first, 5))
        (folder / f"f{index}.csv").write_text("id,name\n" + body)


def _text_files(folder: Path) -> None:
    folder.mkdir()
    for index in range(2):
        (folder / f"f{index}.txt").write_text("".join(f"line {index}.{i}\n" for i in range(4)))


def _parquet_files(folder: Path) -> None:
    folder.mkdir()
    for index, first in enumerate((0, 10)):
        pq.write_table(pa.Table.from_pylist(_rows(first, 5), ROWS), folder / f"f{index}.parquet")


def _orc_files(folder: Path) -> None:
    folder.mkdir()
    for index, first in enumerate((0, 10)):
        orc.write_table(pa.Table.from_pylist(_rows(first, 5), ROWS), str(folder / f"f{index}.orc"))


CORRUPT = ROWS.append(pa.field("_corrupt_record", pa.string()))

SOURCES: dict[str, tuple[type[FileSource], Any, dict[str, Any], pa.Schema | None]] = {
    "json": (JsonFileSource, _json_files, {}, CORRUPT),
    "csv": (CsvFileSource, _csv_files, {"header": True}, ROWS),
    "text": (TextFileSource, _text_files, {}, None),
    "parquet": (ParquetFileSource, _parquet_files, {}, None),
    "orc": (OrcFileSource, _orc_files, {}, None),
}


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_splits_read_from_pickled_split_readers_in_other_processes(
    tmp_path: Path, pool: ProcessPoolExecutor, name: str
) -> None:
    cls, make_files, options, schema = SOURCES[name]
    folder = tmp_path / "in"
    make_files(folder)
    state = mb.StateStore(str(tmp_path / "state"))
    reader = open_reader(cls, {"path": str(folder), **options}, schema=schema, state=state)
    start = reader.initial_offset()
    end = reader.latest_offset(start, reader.default_read_limit())
    splits = list(reader.partitions(start, end))
    assert len(splits) == 2, splits  # one per file: two processes can share the work
    here = pa.Table.from_batches(read_range(reader, start, end), schema=reader.schema)
    split_reader = reader.split_reader()
    blobs = [pickle.dumps((split_reader, split, reader.schema)) for split in splits]
    results = list(pool.map(read_pickled_split, blobs))
    assert all(pid != os.getpid() for pid, _ in results)
    tables = [pa.ipc.open_stream(pa.py_buffer(data)).read_all() for _, data in results]
    elsewhere = pa.concat_tables(tables)
    assert elsewhere.schema == reader.schema
    assert elsewhere.num_rows >= 8
    assert elsewhere.to_pylist() == here.to_pylist()
    if name == "json":  # the partition column and the malformed lines crossed over too
        rows = elsewhere.to_pylist()
        assert {row["k"] for row in rows} == {1, 2}
        assert sum(row["_corrupt_record"] is not None for row in rows) == 2


SINK_SCHEMA = pa.schema([("id", pa.int64()), ("key", pa.string()), ("amount", pa.float64())])


def _part(first: int) -> pa.RecordBatch:
    return pa.record_batch(
        {
            "id": list(range(first, first + 50)),
            "key": ["ab"[i % 2] for i in range(50)],
            "amount": [i / 4 for i in range(50)],
        },
        schema=SINK_SCHEMA,
    )


def _open(cls: type[FileSink], folder: Path) -> Any:
    options = cls.options.parse({"path": str(folder)}, connector=cls.format_name)
    return cls(options).stream_writer(
        WriteContext(schema=SINK_SCHEMA, query_id="q", partition_by=("key",))
    )


def _read_back(name: str, folder: Path) -> list[dict[str, Any]]:
    reader = mb.Session().read.format(name)
    if name != "parquet":
        reader = reader.schema("id BIGINT, amount DOUBLE, key STRING")
    table = reader.load(str(folder))
    return sorted(table.select(["id", "key", "amount"]).to_pylist(), key=lambda row: row["id"])


@pytest.mark.parametrize(
    "cls", [ParquetFileSink, JsonFileSink, CsvFileSink], ids=lambda c: c.__name__
)
def test_parts_written_by_pickled_part_writers_in_other_processes(
    tmp_path: Path, pool: ProcessPoolExecutor, cls: type[FileSink]
) -> None:
    parts = [_part(0), _part(100)]
    contexts = [PartContext(batch_id=0, part_index=i, num_parts=2, query_id="q") for i in range(2)]

    local = _open(cls, tmp_path / "here")
    messages = [
        local.part_writer().write(pa.RecordBatchReader.from_batches(SINK_SCHEMA, [rows]), part)
        for rows, part in zip(parts, contexts, strict=True)
    ]
    local.commit(messages, 0)

    remote = _open(cls, tmp_path / "elsewhere")
    part_writer = remote.part_writer()
    blobs = [
        pickle.dumps((part_writer, ipc_bytes([rows], SINK_SCHEMA), part))
        for rows, part in zip(parts, contexts, strict=True)
    ]
    results = list(pool.map(write_pickled_part, blobs))
    assert all(pid != os.getpid() for pid, _ in results)
    remote.commit([pickle.loads(message) for _, message in results], 0)

    expected = sorted(pa.Table.from_batches(parts).to_pylist(), key=lambda row: row["id"])
    assert _read_back(cls.format_name, tmp_path / "elsewhere") == expected
    assert _read_back(cls.format_name, tmp_path / "here") == expected
    remote.commit([pickle.loads(message) for _, message in results], 0)  # a replay: no-op
    assert _read_back(cls.format_name, tmp_path / "elsewhere") == expected
