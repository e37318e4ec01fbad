"""Which files a folder offers: hidden and in-progress names, partitions, globs, subfolders."""

from __future__ import annotations

import json
import logging
import uuid
from pathlib import Path
from typing import Any

import fsspec
import pyarrow as pa
import pytest
from file_connector_helpers import make_source, open_reader, read_range

from microbatch import ConfigurationError, ReadAllAvailable
from microbatch.errors import SourceError
from microbatch_file._stream_reader import FileStreamReader
from microbatch_file.sources import JsonFileSource

SCHEMA = pa.schema([("id", pa.int64())])


def put(folder: Path, relative: str, *ids: int) -> None:
    path = folder / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"id": i}) + "\n" for i in ids))


def build(path: Path | str, schema: pa.Schema | None = SCHEMA, **options: Any) -> FileStreamReader:
    return open_reader(JsonFileSource, {"path": str(path), **options}, schema=schema)


def read_new(source: FileStreamReader, start: int = -1) -> list[dict[str, Any]]:
    offset = {"logOffset": start}
    end = source.latest_offset(offset, ReadAllAvailable())
    rows = [r for b in read_range(source, offset, end) for r in b.to_pylist()]
    return sorted(rows, key=lambda row: row["id"])


def test_hidden_and_in_progress_files_are_never_read(folder: Path) -> None:
    put(folder, "ok.json", 1)
    put(folder, "_SUCCESS", 2)
    put(folder, "_metadata", 3)
    put(folder, ".hidden.json", 4)
    for index, suffix in enumerate([".tmp", ".part", ".crdownload", ".inprogress", "._COPYING_"]):
        put(folder, f"writing{suffix}", 10 + index)
    put(folder, "_temporary/x.json", 20)
    put(folder, ".staging/y.json", 21)
    assert read_new(build(folder)) == [{"id": 1}]
    custom = build(folder, inProgressSuffixes=".partial")
    assert [row["id"] for row in read_new(custom)] == [1, 10, 11, 12, 13, 14]


def test_partition_folders_become_typed_columns(folder: Path) -> None:
    put(folder, "year=2024/region=eu/a.json", 1)
    put(folder, "year=2025/region=us%2Fwest/b.json", 2)
    put(folder, "year=2025/region=__HIVE_DEFAULT_PARTITION__/c.json", 3)
    source = build(folder)
    assert source.schema == pa.schema(
        [("id", pa.int64()), ("year", pa.int32()), ("region", pa.string())]
    )
    assert read_new(source) == [
        {"id": 1, "year": 2024, "region": "eu"},
        {"id": 2, "year": 2025, "region": "us/west"},
        {"id": 3, "year": 2025, "region": None},
    ]


def test_the_schema_types_partition_columns_it_names(folder: Path) -> None:
    put(folder, "year=2024/a.json", 1)
    schema = pa.schema([("year", pa.string()), ("id", pa.int64())])
    source = build(folder, schema=schema)
    assert source.schema == pa.schema([("id", pa.int64()), ("year", pa.string())])
    assert read_new(source) == [{"id": 1, "year": "2024"}]


def test_new_partition_values_are_read_and_bad_ones_refused(folder: Path) -> None:
    put(folder, "year=2024/a.json", 1)
    source = build(folder)
    assert len(read_new(source)) == 1
    put(folder, "year=2025/b.json", 2)
    assert read_new(source, 0) == [{"id": 2, "year": 2025}]
    put(folder, "year=later/c.json", 3)
    with pytest.raises(SourceError, match=r"year=later.*cannot be a value of column 'year'"):
        read_new(source, 1)


def test_a_file_beside_partition_folders_is_refused_not_skipped(folder: Path) -> None:
    put(folder, "year=2024/a.json", 1)
    put(folder, "stray.json", 2)
    with pytest.raises(ConfigurationError, match=r"different folder layouts") as caught:
        build(folder)
    assert "stray.json" in str(caught.value) and "year=.../<file>" in str(caught.value)
    (folder / "stray.json").unlink()
    source = build(folder)
    read_new(source)
    put(folder, "stray.json", 2)
    with pytest.raises(SourceError, match=r"stray\.json lies in folders <file>"):
        read_new(source, 0)
    assert source.log.latest_batch == 0  # refused before it was recorded


def test_other_subfolders_are_reported_and_read_recursively_on_request(
    folder: Path, caplog: pytest.LogCaptureFixture
) -> None:
    put(folder, "top.json", 1)
    put(folder, "nested/deeper/n.json", 2)
    with caplog.at_level(logging.WARNING, logger="microbatch.file"):
        assert read_new(build(folder)) == [{"id": 1}]
    assert "nested" in caplog.text and "recursiveFileLookup" in caplog.text
    assert read_new(build(folder, recursiveFileLookup=True)) == [{"id": 1}, {"id": 2}]


def test_globs_single_files_and_name_filters(folder: Path) -> None:
    put(folder, "a/x.json", 1)
    put(folder, "b/y.json", 2)
    put(folder, "b/z.csv", 3)
    put(folder, "c.json", 4)
    assert read_new(build(f"{folder}/*/*.json")) == [{"id": 1}, {"id": 2}]
    assert read_new(build(f"{folder}/[ab]")) == [{"id": 1}, {"id": 2}, {"id": 3}]
    assert read_new(build(folder / "c.json")) == [{"id": 4}]
    assert read_new(build(f"{folder}/b", pathGlobFilter="*.csv")) == [{"id": 3}]


def test_memory_filesystem_partitions() -> None:
    fs = fsspec.filesystem("memory")
    root = f"/layout-{uuid.uuid4().hex}"
    fs.pipe(f"{root}/k=1/a.json", b'{"id": 1}\n')
    fs.pipe(f"{root}/k=2/b.json", b'{"id": 2}\n')
    fs.pipe(f"{root}/k=2/b.json.tmp", b'{"id": 3}\n')
    source = build(f"memory://{root}")
    described = make_source(JsonFileSource, {"path": f"memory://{root}"}).describe()
    assert described == f"FileStreamSource[memory://{root}]"
    assert read_new(source) == [{"id": 1, "k": 1}, {"id": 2, "k": 2}]
