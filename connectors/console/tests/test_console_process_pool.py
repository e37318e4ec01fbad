"""The console sink's parts written in other processes, from pickled part writers; the batch
is printed by the stream writer of this process when it commits."""

from __future__ import annotations

import io

import pyarrow as pa

from microbatch import WriteContext
from microbatch_console import ConsoleSink
from microbatch_testkit import write_batch_elsewhere

RULE = "-" * 43


def test_console_parts_written_in_spawned_processes() -> None:
    schema = pa.schema([("n", pa.int64()), ("word", pa.string())])
    parts = [
        pa.table({"n": [1, 2], "word": ["a", None]}, schema=schema),
        pa.table({"n": [3], "word": ["c"]}, schema=schema),
    ]
    sink = ConsoleSink(ConsoleSink.options.parse({}, connector="console"))
    out = io.StringIO()
    sink.stream = out
    writer = sink.stream_writer(WriteContext(schema=schema, query_id="q"))
    write_batch_elsewhere(writer, schema, [table.to_batches() for table in parts], 7, "q")
    assert out.getvalue() == (
        f"{RULE}\nBatch: 7\n{RULE}\n"
        "+---+----+\n"
        "|  n|word|\n"
        "+---+----+\n"
        "|  1|   a|\n"
        "|  2|NULL|\n"
        "|  3|   c|\n"
        "+---+----+\n"
        "\n"
    )
