"""Reading the output folder of the file sink: only the files its manifest lists."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import microbatch as mb
from microbatch import ConfigurationError


def write_output(tmp_path: Path, *batches: list[dict[str, object]]) -> Path:
    """Run a json -> parquet (partitioned by kind) query over ``batches``, one file each."""
    source, out = tmp_path / "in", tmp_path / "out"
    source.mkdir(exist_ok=True)
    for index, rows in enumerate(batches):
        text = "".join(json.dumps(row) + "\n" for row in rows)
        (source / f"f{index:03d}.json").write_text(text)
    session = mb.Session()
    query = (
        session.read_stream.format("json")
        .schema("id BIGINT, kind STRING")
        .option("maxFilesPerTrigger", 1)
        .load(str(source))
        .write_stream.format("parquet")
        .partition_by("kind")
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(available_now=True)
        .start(str(out))
    )
    assert query.await_termination(timeout=30)
    return out


def add_strays(out: Path) -> None:
    """Files a crashed batch could leave: never listed by the manifest."""
    table = pa.table({"id": [666]})
    pq.write_table(table, out / "kind=a" / "part-99999-00000-crashed.c000.snappy.parquet")
    pq.write_table(table, out / "part-stray.parquet")


def test_batch_read_sees_only_committed_files(tmp_path: Path) -> None:
    out = write_output(
        tmp_path, [{"id": 1, "kind": "a"}, {"id": 2, "kind": "b"}], [{"id": 3, "kind": "a"}]
    )
    add_strays(out)
    table = mb.Session().read.format("parquet").load(str(out))
    assert table.schema.names == ["id", "kind"]
    assert sorted(table.to_pylist(), key=lambda row: row["id"]) == [
        {"id": 1, "kind": "a"},
        {"id": 2, "kind": "b"},
        {"id": 3, "kind": "a"},
    ]


def test_a_stream_over_the_output_follows_the_manifest(tmp_path: Path) -> None:
    out = write_output(tmp_path, [{"id": 1, "kind": "a"}])
    add_strays(out)
    session = mb.Session()
    frame = session.read_stream.format("parquet").schema("id BIGINT, kind STRING").load(str(out))
    query = (
        frame.write_stream.format("memory")
        .query_name("copy")
        .option("checkpointLocation", str(tmp_path / "cp-copy"))
        .start()
    )
    try:
        query.process_all_available()
        assert session.table("copy").to_pylist() == [{"id": 1, "kind": "a"}]
        write_output(tmp_path, [{"id": 1, "kind": "a"}], [{"id": 2, "kind": "c"}])
        query.process_all_available()
        rows = sorted(session.table("copy").to_pylist(), key=lambda row: row["id"])
        assert rows == [{"id": 1, "kind": "a"}, {"id": 2, "kind": "c"}]
    finally:
        query.stop()


def test_clean_source_is_refused_on_the_output(tmp_path: Path) -> None:
    out = write_output(tmp_path, [{"id": 1, "kind": "a"}])
    session = mb.Session()
    frame = (
        session.read_stream.format("parquet")
        .schema("id BIGINT, kind STRING")
        .option("cleanSource", "delete")
        .load(str(out))
    )
    writer = frame.write_stream.format("memory").query_name("x")
    with pytest.raises(ConfigurationError, match="Clean up source files is not supported"):
        writer.option("checkpointLocation", str(tmp_path / "cp2")).start()
