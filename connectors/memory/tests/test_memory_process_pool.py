"""The memory source's splits are read, and the memory sink's parts written, in a spawned
process from pickled split readers and part writers; the batch commits in this process.

A split carries the rows of its batch, so reading it needs no ``MemoryStream`` (which lives in
this process only and does not pickle).
"""

from __future__ import annotations

import pickle

import pyarrow as pa
import pytest

import microbatch as mb
from microbatch import ReadAllAvailable, ReadContext, StreamReader, WriteContext
from microbatch_memory import MemorySink, MemoryStream, MemoryStreamSource
from microbatch_testkit import read_elsewhere, write_batch_elsewhere

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])


def filled_stream() -> MemoryStream:
    stream = MemoryStream(SCHEMA)
    stream.add_data([{"id": 1, "name": "a"}, {"id": 2, "name": None}])
    stream.add_data([])
    stream.add_data([{"id": 3, "name": "c"}])
    return stream


def stream_reader(stream: MemoryStream) -> StreamReader:
    options = MemoryStreamSource.options.parse({"stream": stream}, connector="memory")
    source = MemoryStreamSource(options)
    return source.stream_reader(ReadContext(schema=source.schema()))


def test_memory_splits_read_in_a_spawned_process() -> None:
    stream = filled_stream()
    reader = stream_reader(stream)
    start = reader.initial_offset()
    end = reader.latest_offset(start, ReadAllAvailable())
    with pytest.raises(TypeError):
        pickle.dumps(stream)  # the stream cannot travel: the splits carry its rows
    batches = [batch for split in read_elsewhere(reader, start, end) for batch in split]
    elsewhere = pa.Table.from_batches(batches, schema=SCHEMA)
    expected = pa.concat_tables([stream.batch(index) for index in range(3)])
    assert elsewhere.equals(expected)
    assert elsewhere.column("id").to_pylist() == [1, 2, 3]
    reader.stop()


@pytest.mark.parametrize(
    ("mode", "expected"),
    [(mb.OutputMode.APPEND, [1, 2, 3]), (mb.OutputMode.COMPLETE, [3])],
)
def test_memory_sink_parts_written_in_a_spawned_process(
    mode: mb.OutputMode, expected: list[int]
) -> None:
    reader = stream_reader(filled_stream())
    with mb.Session(load_plugins=False) as session:
        sink = MemorySink(MemorySink.options.parse({}, connector="memory"), session=session)
        context = WriteContext(
            schema=SCHEMA, output_mode=mode, query_id="q", query_name="out", session=session
        )
        writer = sink.stream_writer(context)

        def run_batch(batch_id: int, start: int, end: int) -> None:
            """Read and write every split elsewhere, then commit the batch here."""
            parts = read_elsewhere(reader, {"offset": start}, {"offset": end})
            write_batch_elsewhere(writer, SCHEMA, parts, batch_id, "q")

        run_batch(0, 0, 2)
        assert session.table("out").column("id").to_pylist() == [1, 2]
        run_batch(0, 0, 2)  # a replay of the batch: applied once
        assert session.table("out").column("id").to_pylist() == [1, 2]
        run_batch(1, 2, 3)
        assert session.table("out").column("id").to_pylist() == expected
        writer.stop()
    reader.stop()
