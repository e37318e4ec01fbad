"""Partition folders every reader can read: hidden names refused, over-long values refused,
and leftovers of crashed attempts swept from partition folders of any depth and name."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import fsspec
import pyarrow as pa
import pytest

import microbatch as mb
from microbatch import PartContext, WriteContext
from microbatch.errors import ConfigurationError, SinkError, StreamingQueryException
from microbatch_file._writer_files import PART_FILE, OutputFolder
from microbatch_file.manifest import METADATA_DIR, Manifest
from microbatch_file.sinks import FileStreamWriter, ParquetFileSink

SCHEMA = pa.schema([("id", pa.int64()), ("key", pa.string())])


def make_sink(folder: str, schema: pa.Schema = SCHEMA, **context: Any) -> FileStreamWriter:
    options = ParquetFileSink.options.parse({"path": folder}, connector="parquet")
    return ParquetFileSink(options).stream_writer(
        WriteContext(schema=schema, query_id="q", **context)
    )


def write(sink: FileStreamWriter, batch_id: int, rows: pa.RecordBatch, part: int = 0) -> Any:
    context = PartContext(batch_id=batch_id, part_index=part, num_parts=part + 1, query_id="q")
    data = pa.RecordBatchReader.from_batches(rows.schema, [rows])
    return sink.part_writer().write(data, context)


def data_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and PART_FILE.match(p.name)]


@pytest.fixture(params=["local", "memory"])
def folder(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "local":
        return str(tmp_path / "out")
    return f"memory://partitions-{uuid.uuid4().hex}/out"


# ------------------------------------------------------------------ hidden names


@pytest.mark.parametrize("name", ["_day", ".p", "../x", "__x"])
def test_partition_columns_with_hidden_folder_names_are_refused_at_start(
    tmp_path: Path, name: str
) -> None:
    writer = (
        mb.Session()
        .read_stream.format("rate-micro-batch")
        .option("rowsPerBatch", 5)
        .load()
        .with_column_renamed("value", name)
        .write_stream.format("parquet")
        .partition_by(name)
        .option("checkpointLocation", str(tmp_path / "cp"))
    )
    with pytest.raises(ConfigurationError, match=r"starts with '_' or '\.' as hidden") as error:
        writer.start(str(tmp_path / "out"))
    assert repr(name) in str(error.value)
    assert not (tmp_path / "out").exists()


def test_a_column_name_that_leaves_no_room_for_a_value_is_refused(folder: str) -> None:
    schema = pa.schema([("id", pa.int64()), ("k" * 240, pa.string())])
    with pytest.raises(ConfigurationError, match="rename the column"):
        make_sink(folder, schema, partition_by=("k" * 240,))


# ------------------------------------------------------------------ over-long values


def test_a_value_too_long_for_a_folder_name_fails_the_batch_clearly(folder: str) -> None:
    sink = make_sink(folder, partition_by=("key",))
    fits = "v" * (255 - len("key="))  # NAME_MAX bytes exactly
    sink.commit([write(sink, 0, pa.record_batch({"id": [1], "key": [fits]}, SCHEMA))], 0)
    too_long = "é" * 126  # 252 bytes in UTF-8: "key=" + 252 > 255
    rows = pa.record_batch({"id": [2, 3, 4], "key": ["a", too_long, "b"]}, SCHEMA)
    with pytest.raises(SinkError) as error:
        write(sink, 1, rows)
    message = str(error.value)
    assert "partition column 'key'" in message and "batch 1" in message
    assert f"'{'é' * 40}'" in message and "256 bytes" in message and "255" in message
    manifest = Manifest(sink.fs, sink.root)
    assert manifest.latest_batch_id() == 0
    assert [f["partition"] for f in manifest.entries()[0]["files"]] == [{"key": fits}]
    listed = {p.rsplit("/", 1)[-1] for p in sink.fs.find(sink.root)}
    assert len([name for name in listed if PART_FILE.match(name)]) == 1, "files were left"


def test_a_query_whose_batch_has_an_over_long_value_fails_with_that_error(
    tmp_path: Path,
) -> None:
    source = tmp_path / "in"
    source.mkdir()
    rows = [{"id": 1, "key": "short"}, {"id": 2, "key": "x" * 300}]
    (source / "f.json").write_text("".join(json.dumps(row) + "\n" for row in rows))
    query = (
        mb.Session()
        .read_stream.format("json")
        .schema("id BIGINT, key STRING")
        .load(str(source))
        .write_stream.format("parquet")
        .partition_by("key")
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(available_now=True)
        .start(str(tmp_path / "out"))
    )
    with pytest.raises(StreamingQueryException, match="partition column 'key' has a value too"):
        query.await_termination(timeout=60)
    assert data_files(tmp_path / "out") == []


# ------------------------------------------------------------------ sweeping leftovers


def test_the_sweep_finds_files_in_partition_folders_of_any_depth_and_name(
    tmp_path: Path,
) -> None:
    root = tmp_path / "out"
    name = f"part-00001-00000-{uuid.uuid4()}.c000.snappy.parquet"
    places = ["", "a=1/", "a=1/b=2/c=3/", "_day=1/", ".p=1/", "k=_x/.q=2/"]
    for place in places:
        (root / place).mkdir(parents=True, exist_ok=True)
        (root / place / name).write_bytes(b"x")
    (root / METADATA_DIR).mkdir()
    (root / METADATA_DIR / name).write_bytes(b"x")  # never a data file
    folder = OutputFolder(fsspec.filesystem("file"), str(root))
    assert sorted(folder.data_files(1)) == sorted(f"{place}{name}" for place in places)
    assert folder.data_files(2) == []


def test_a_replay_deletes_what_a_crashed_attempt_left_in_nested_folders(folder: str) -> None:
    schema = pa.schema([("id", pa.int64()), ("a", pa.string()), ("b", pa.int64())])
    rows = pa.record_batch({"id": [1, 2, 3], "a": ["x", "y", "x"], "b": [1, 2, 3]}, schema)
    crashed = make_sink(folder, schema, partition_by=("a", "b"))
    crashed.commit([write(crashed, 0, rows)], 0)
    left = write(crashed, 1, rows)  # the process dies before the commit
    assert len(left.files) == 3 and all(f["path"].count("/") == 2 for f in left.files)
    rerun = make_sink(folder, schema, partition_by=("a", "b"))
    again = write(rerun, 1, rows)
    rerun.commit([again], 1)
    on_disk = {
        str(p)[len(rerun.root) + 1 :]
        for p in rerun.fs.find(rerun.root)
        if PART_FILE.match(str(p).rsplit("/", 1)[-1])
    }
    listed = {f["path"] for e in Manifest(rerun.fs, rerun.root).entries() for f in e["files"]}
    assert on_disk == listed and len(listed) == 6
