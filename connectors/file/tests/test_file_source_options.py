"""File source options: load-time checks, schema rules and the per-batch limits."""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from file_connector_helpers import make_source, open_reader, read_range

import microbatch as mb
from microbatch import (
    ConfigurationError,
    OptionError,
    ReadAllAvailable,
    ReadLimit,
    StateStore,
)
from microbatch.errors import SchemaError
from microbatch_file._stream_reader import FileStreamReader
from microbatch_file.sources import FileSource, JsonFileSource, ParquetFileSource

SCHEMA = pa.schema([("id", pa.int64())])
NOW = 1_700_000_000.0


def write(folder: Path, name: str, ids: list[int], mtime: float, pad: int = 0) -> Path:
    """A JSON-lines file with one row per id and a fixed modification time."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    text = "".join(json.dumps({"id": i, "pad": "x" * pad}) + "\n" for i in ids)
    path.write_text(text)
    os.utime(path, (mtime, mtime))
    return path


def build(
    path: Path | str,
    *,
    cls: type[FileSource] = JsonFileSource,
    schema: pa.Schema | None = SCHEMA,
    state: StateStore | None = None,
    session: Any = None,
    streaming: bool = False,
    **options: Any,
) -> FileStreamReader:
    """A source's stream reader as the engine makes one; ``streaming=False`` (no folder
    watcher) lists the folder at every call, so that files written just before are seen at
    once."""
    return open_reader(
        cls,
        {"path": str(path), **options},
        schema=schema,
        state=state,
        session=session,
        streaming=streaming,
    )


def batches(source: FileStreamReader, limit: ReadLimit | None = None) -> list[list[int]]:
    """The ids of each batch the source takes until nothing is new."""
    limit = limit if limit is not None else source.default_read_limit()
    offset = source.initial_offset()
    found: list[list[int]] = []
    while True:
        end = source.latest_offset(offset, limit)
        if end == offset:
            return found
        rows = [r for b in read_range(source, offset, end) for r in b.column("id").to_pylist()]
        found.append(rows)
        offset = end


# -- load-time checks ------------------------------------------------------------------------
def test_missing_path_fails_at_load_as_spark(tmp_path: Path) -> None:
    session = mb.Session()
    reader = session.read_stream.format("json").schema("id BIGINT")
    with pytest.raises(ConfigurationError, match=r"\[PATH_NOT_FOUND\] Path does not exist: file:"):
        reader.load(str(tmp_path / "nowhere"))
    frame = reader.load(str(tmp_path / "no*where"))  # a glob may match later
    assert frame.schema.names == ["id"]


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"maxFilesPerTrigger": 2, "maxBytesPerTrigger": 10}, "can't be both set at the same time"),
        ({"cleanSource": "archive"}, "Archive mode must be used with 'sourceArchiveDir' option"),
        ({"cleanSource": "bogus"}, "must be one of OFF, ARCHIVE, DELETE"),
        ({"maxFilesPerTrigger": "0"}, "must be at least 1"),
        ({"encoding": "UTF-16"}, "need their byte order"),
        ({"encoding": "UTF-16LE"}, "lineSep option must be specified"),
        ({"encoding": "cp1252"}, "INVALID_PARAMETER_VALUE.CHARSET"),
        ({"maxFilesPerTriger": 3}, "did you mean 'maxFilesPerTrigger'"),
    ],
)
def test_invalid_options_fail_at_load(folder: Path, options: dict[str, Any], expected: str) -> None:
    session = mb.Session()
    reader = session.read_stream.format("json").schema("id BIGINT").options(**options)
    with pytest.raises(OptionError) as caught:
        reader.load(str(folder))
    assert expected in str(caught.value)


def test_archive_folder_inside_the_source_is_refused(folder: Path, tmp_path: Path) -> None:
    session = mb.Session()
    for archive in (folder / "archive", tmp_path, Path("/")):
        reader = session.read_stream.format("json").schema("id BIGINT")
        reader.option("cleanSource", "archive").option("sourceArchiveDir", str(archive))
        with pytest.raises(OptionError, match="Base archive path cannot be set"):
            reader.load(str(folder))
    outside = tmp_path.parent / f"{tmp_path.name}-archive"
    reader = session.read_stream.format("json").schema("id BIGINT")
    reader.option("cleanSource", "ARCHIVE").option("sourceArchiveDir", str(outside))
    assert reader.load(str(folder)).schema.names == ["id"]


def test_schema_is_required_unless_inference_is_on(folder: Path) -> None:
    write(folder, "a.json", [1], NOW)
    session = mb.Session()
    with pytest.raises(SchemaError, match="schemaInference"):
        session.read_stream.format("json").load(str(folder))
    session.conf.set("schemaInference", True)
    frame = session.read_stream.format("json").load(str(folder))
    assert frame.schema == pa.schema([("id", pa.int64()), ("pad", pa.string())])


def test_schema_inference_option_on_the_source(folder: Path) -> None:
    write(folder, "a.json", [1], NOW)
    with pytest.raises(SchemaError, match="Schema must be specified"):
        build(folder, schema=None)
    source = build(folder, schema=None, schemaInference=True)
    assert source.schema.names == ["id", "pad"]


def test_inference_on_an_empty_folder_fails_as_spark(folder: Path) -> None:
    with pytest.raises(SchemaError, match=r"Unable to infer schema for JSON\. It must be"):
        build(folder, schema=None, schemaInference=True)


def test_inferred_json_schema_widens_and_sorts_like_spark(folder: Path) -> None:
    (folder / "a.json").write_text('{"b": 1, "a": "x", "t": "2024-01-01T00:00:00"}\n')
    (folder / "b.json").write_text('{"b": 1.5, "c": null}\n{"b": "text"}\n')
    source = build(folder, schema=None, schemaInference=True)
    assert source.schema == pa.schema(
        [("a", pa.string()), ("b", pa.string()), ("c", pa.string()), ("t", pa.string())]
    )


def test_parquet_reads_its_own_schema_in_batch_reads(folder: Path) -> None:
    table = pa.table({"id": pa.array([1, 2], pa.int32()), "name": ["a", "b"]})
    pq.write_table(table, folder / "part-0.parquet")
    session = mb.Session()
    read = session.read.format("parquet").load(str(folder))
    assert read.to_pylist() == table.to_pylist()
    with pytest.raises(SchemaError, match="schemaInference"):
        build(folder, cls=ParquetFileSource, schema=None, streaming=True)


def test_parquet_and_orc_infer_in_streaming_when_asked(folder: Path) -> None:
    import pyarrow.orc as orc

    pq.write_table(pa.table({"id": [1], "a": ["x"]}), folder / "p0.parquet")
    pq.write_table(pa.table({"id": [2], "b": [1.5]}), folder / "p1.parquet")
    first = build(folder, cls=ParquetFileSource, schema=None, streaming=True, schemaInference=True)
    assert first.schema.names == ["id", "a"]
    merged = build(
        folder, cls=ParquetFileSource, schema=None, schemaInference=True, mergeSchema=True
    )
    assert merged.schema.names == ["id", "a", "b"]
    assert sorted(batches(merged)[0]) == [1, 2]
    orc_folder = folder.parent / "orc"
    orc_folder.mkdir()
    orc.write_table(pa.table({"id": [5, 6]}), str(orc_folder / "o.orc"))
    table = mb.Session().read.format("orc").load(str(orc_folder))
    assert table.to_pylist() == [{"id": 5}, {"id": 6}]


# -- limits ----------------------------------------------------------------------------------
def test_max_files_per_trigger_takes_the_oldest_files_first(folder: Path) -> None:
    for index in range(5):
        write(folder, f"f{4 - index}.json", [index], NOW + index)
    source = build(folder, maxFilesPerTrigger=2)
    assert batches(source) == [[0, 1], [2, 3], [4]]


def test_latest_first_takes_the_newest_files_first(folder: Path) -> None:
    for index in range(5):
        write(folder, f"f{index}.json", [index], NOW + index)
    source = build(folder, maxFilesPerTrigger=2, latestFirst=True)
    assert batches(source) == [[4, 3], [2, 1], [0]]


def test_max_bytes_per_trigger_takes_at_least_one_file(folder: Path) -> None:
    write(folder, "a.json", [1], NOW, pad=10)  # 26 bytes
    write(folder, "b.json", [2], NOW + 1, pad=10)
    write(folder, "c.json", [3], NOW + 2, pad=500)  # larger than the limit: alone
    write(folder, "d.json", [4], NOW + 3, pad=10)
    source = build(folder, maxBytesPerTrigger=70)
    assert batches(source) == [[1, 2], [3], [4]]


def test_max_file_age_skips_late_old_files_loudly(
    folder: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write(folder, "new.json", [1], NOW)
    source = build(folder, maxFileAge="1 hour")
    assert batches(source) == [[1]]
    write(folder, "late-but-recent.json", [2], NOW - 1800)
    write(folder, "late-and-old.json", [3], NOW - 7200)
    offset = {"logOffset": 0}
    with caplog.at_level(logging.WARNING, logger="microbatch.file"):
        end = source.latest_offset(offset, ReadAllAvailable())
    rows = [r for b in read_range(source, offset, end) for r in b["id"].to_pylist()]
    assert rows == [2]
    assert source.metrics()["numFilesSkippedForAge"] == "1"
    assert "late-and-old.json" in caplog.text
    assert "maxFileAge" in caplog.text


def test_latest_first_with_a_limit_ignores_max_file_age(folder: Path) -> None:
    write(folder, "new.json", [1], NOW)
    source = build(folder, maxFileAge="1 hour", latestFirst=True, maxFilesPerTrigger=5)
    assert batches(source) == [[1]]
    write(folder, "old.json", [2], NOW - 7200)
    end = source.latest_offset({"logOffset": 0}, source.default_read_limit())
    assert end == {"logOffset": 1}
    assert source.metrics()["numFilesSkippedForAge"] == "0"


def test_file_name_only_treats_a_known_name_as_read(folder: Path) -> None:
    write(folder / "day=1", "events.json", [1], NOW)
    write(folder / "day=2", "events.json", [2], NOW + 1)
    write(folder / "day=2", "other.json", [3], NOW + 2)
    by_name = build(folder, fileNameOnly=True)
    assert batches(by_name) == [[1, 3]]
    by_path = build(folder)
    assert batches(by_path) == [[1, 2, 3]]


def test_min_file_age_on_memory_holds_a_fresh_file() -> None:
    import uuid

    import fsspec

    root = f"/min-age-{uuid.uuid4().hex}"
    fsspec.filesystem("memory").pipe(f"{root}/a.json", b'{"id": 1}\n')
    source = build(f"memory://{root}", minFileAge="2s")  # the first look comes well before
    assert batches(source) == []
    assert source.metrics()["numFilesHeldBack"] == "1"
    time.sleep(2.05)
    assert batches(source) == [[1]]


def test_describe_names_the_folder(folder: Path) -> None:
    source = make_source(JsonFileSource, {"path": str(folder)}, schema=SCHEMA)
    assert source.describe() == f"FileStreamSource[file:{folder}]"
