"""The example connectors in a real query: counter -> JSON lines, across a restart."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

import microbatch as mb
from microbatch_example import read_jsonl_folder


def run_once(checkpoint: Path, out: Path) -> None:
    session = mb.Session()
    query = (
        session.read_stream.format("example-counter")
        .option("rowsPerBatch", 4)
        .option("step", 10)
        .load()
        .write_stream.format("example-jsonl")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(once=True)
        .start()
    )
    assert query.await_termination(timeout=30)
    assert query.exception() is None


def test_each_run_appends_the_next_batch(tmp_path: Path) -> None:
    checkpoint, out = tmp_path / "checkpoint", tmp_path / "out"
    run_once(checkpoint, out)
    run_once(checkpoint, out)
    schema = pa.schema([("id", pa.int64()), ("value", pa.int64())])
    table = read_jsonl_folder(out, schema)
    assert table.to_pydict() == {"id": list(range(8)), "value": list(range(0, 80, 10))}
    assert sorted(path.name for path in out.iterdir()) == [
        "batch-0000000000.jsonl",
        "batch-0000000001.jsonl",
    ]
