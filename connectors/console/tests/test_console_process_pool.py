"""The console sink's parts written in other processes, from pickled part writers; the batch
is printed by the stream writer of this process when it commits."""

from __future__ import annotations

import importlib
import io
import multiprocessing
import os
import pickle
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pyarrow as pa

from microbatch import PartContext, WriteContext
from microbatch_console import ConsoleSink

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
    payload = pickle.dumps(writer.part_writer())
    here = str(Path(__file__).parent)
    sys.path.insert(0, here)  # the spawned processes start with this sys.path
    try:
        worker = importlib.import_module("_console_spawn")
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=2, mp_context=context) as pool:
            futures = [
                pool.submit(
                    worker.write_pickled,
                    payload,
                    table,
                    pickle.dumps(PartContext(7, index, len(parts), query_id="q")),
                )
                for index, table in enumerate(parts)
            ]
            results = [future.result(timeout=60) for future in futures]
    finally:
        sys.path.remove(here)
    assert all(pid != os.getpid() for pid, _ in results)
    writer.commit([pickle.loads(message) for _, message in results], 7)
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
