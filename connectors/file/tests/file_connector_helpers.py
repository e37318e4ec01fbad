"""Making file sources as the builders and the engine do, for tests that drive them directly;
a JSON folder streamed into a memory table, for tests that run real queries; and the work a
process pool does with pickled split readers and part writers."""

from __future__ import annotations

import contextlib
import os
import pickle
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import microbatch as mb
from microbatch import Offset, ReadContext, StateStore
from microbatch_file._stream_reader import FileStreamReader
from microbatch_file.sources import FileSource


def make_source(
    cls: type[FileSource],
    options: dict[str, Any],
    *,
    schema: pa.Schema | None = None,
    session: Any = None,
    streaming: bool = False,
) -> FileSource:
    """The connector object, as ``load()`` makes it (no I/O yet)."""
    parsed = cls.options.parse(options, connector=cls.format_name)
    return cls(parsed, user_schema=schema, session=session, streaming=streaming)


def open_reader(
    cls: type[FileSource],
    options: dict[str, Any],
    *,
    schema: pa.Schema | None = None,
    state: StateStore | None = None,
    session: Any = None,
    streaming: bool = False,
    wake: Callable[[], None] | None = None,
) -> FileStreamReader:
    """A stream reader made as ``load()`` then ``start()`` make one: ``schema()`` once, then
    ``stream_reader(ReadContext(...))``."""
    source = make_source(cls, options, schema=schema, session=session, streaming=streaming)
    context = ReadContext(
        schema=source.schema(),
        state=state,
        streaming=streaming,
        session=session,
        **({"wake": wake} if wake is not None else {}),
    )
    return source.stream_reader(context)


def read_range(reader: FileStreamReader, start: Offset, end: Offset) -> list[pa.RecordBatch]:
    """The batches of ``(start, end]``: ``partitions`` then ``split_reader().read`` per split."""
    split_reader = reader.split_reader()
    return [batch for split in reader.partitions(start, end) for batch in split_reader.read(split)]


def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> float:
    """Seconds until ``condition()`` held; fails the test after ``timeout``."""
    began = time.monotonic()
    while not condition():
        if time.monotonic() - began > timeout:
            pytest.fail(f"condition not met within {timeout} s")
        time.sleep(0.01)
    return time.monotonic() - began


def start_memory_query(
    session: mb.Session, folder: Path, checkpoint: Path, **options: Any
) -> mb.StreamingQuery:
    """A query streaming the JSON files of ``folder`` (``id BIGINT, text STRING``) into the
    memory table ``events``."""
    return (
        session.read_stream.format("json")
        .schema("id BIGINT, text STRING")
        .options(**options)
        .load(str(folder))
        .write_stream.format("memory")
        .query_name("events")
        .option("checkpointLocation", str(checkpoint))
        .start()
    )


@contextlib.contextmanager
def memory_query(
    session: mb.Session, folder: Path, checkpoint: Path, **options: Any
) -> Iterator[mb.StreamingQuery]:
    """:func:`start_memory_query`, with what is in ``folder`` already processed; stopped when
    the block ends."""
    query = start_memory_query(session, folder, checkpoint, **options)
    try:
        query.process_all_available()
        yield query
    finally:
        query.stop()


def ipc_bytes(batches: list[pa.RecordBatch], schema: pa.Schema) -> bytes:
    """``batches`` as one Arrow IPC stream."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema) as stream:
        for batch in batches:
            stream.write_batch(batch)
    return bytes(sink.getvalue().to_pybytes())


def read_pickled_split(blob: bytes) -> tuple[int, bytes]:
    """In a pool process: unpickle ``(split_reader, split, schema)``, read the split; return
    this process's id and the rows as an Arrow IPC stream."""
    split_reader, split, schema = pickle.loads(blob)
    return os.getpid(), ipc_bytes(list(split_reader.read(split)), schema)


def write_pickled_part(blob: bytes) -> tuple[int, bytes]:
    """In a pool process: unpickle ``(part_writer, rows as IPC, part context)``, write the
    part; return this process's id and the pickled commit message."""
    part_writer, data, part = pickle.loads(blob)
    message = part_writer.write(pa.ipc.open_stream(pa.py_buffer(data)), part)
    return os.getpid(), pickle.dumps(message)
