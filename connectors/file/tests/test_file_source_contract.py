"""The testkit's source contract for the file sources, on a local folder and on memory://."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq

from microbatch import ReadLimit, ReadMaxBytes, Split, StreamReader
from microbatch_file.sources import (
    CsvFileSource,
    JsonFileSource,
    ParquetFileSource,
    TextFileSource,
)
from microbatch_testkit import SourceContract

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])


def _rows(start: int, count: int) -> list[dict[str, Any]]:
    return [{"id": start + i, "name": f"n{start + i}"} for i in range(count)]


class _LocalFiles:
    """``produce`` drops three new files (renamed into place) into ``<tmp>/in``."""

    suffix = ".json"
    produced = 0
    tmp_path: Path

    def folder(self) -> Path:
        folder = self.tmp_path / "in"
        folder.mkdir(exist_ok=True)
        return folder

    def content(self, rows: list[dict[str, Any]]) -> bytes:
        return b"".join(json.dumps(row).encode() + b"\n" for row in rows)

    def produce(self, reader: StreamReader) -> None:
        for _ in range(3):
            start = type(self).produced * 10
            type(self).produced += 1
            target = self.folder() / f"part-{start:05d}{self.suffix}"
            staging = target.with_name(target.name + ".tmp")
            staging.write_bytes(self.content(_rows(start, 4)))
            os.replace(staging, target)  # latest_offset sees it at once, watcher or not

    def make_schema(self) -> pa.Schema | None:
        return SCHEMA

    def count_units(self, splits: Sequence[Split], limit: ReadLimit) -> int:
        files = [entry for split in splits for entry in split.files]
        if isinstance(limit, ReadMaxBytes):
            return sum(entry.size for entry in files) if len(files) > 1 else 0
        return len(files)


class TestJsonFileSourceContract(_LocalFiles, SourceContract):
    source_class = JsonFileSource

    def make_options(self) -> dict[str, Any]:
        return {"path": str(self.folder()), "maxFilesPerTrigger": 2}

    def bad_options(self) -> list[tuple[dict[str, Any], str]]:
        path = str(self.folder())
        return [
            (
                {"path": path, "maxFilesPerTrigger": 1, "maxBytesPerTrigger": 10},
                "can't be both set",
            ),
            ({"path": path, "maxFilesPerTrigger": 0}, "maxFilesPerTrigger"),
            ({"path": path, "cleanSource": "archive"}, "sourceArchiveDir"),
            ({"path": path, "cleanSource": "bogus"}, "cleanSource"),
            ({"path": path, "mode": "lenient"}, "PERMISSIVE"),
            ({"path": path, "encoding": "windows-1252"}, "INVALID_PARAMETER_VALUE.CHARSET"),
            ({"path": path, "encoding": "latin-1"}, "lineSep option must be specified"),
            ({"path": path, "latestFirst": "yes"}, "must be 'true' or 'false'"),
        ]


class TestParquetFileSourceContract(_LocalFiles, SourceContract):
    source_class = ParquetFileSource
    suffix = ".parquet"

    def content(self, rows: list[dict[str, Any]]) -> bytes:
        sink = pa.BufferOutputStream()
        pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), sink)
        return bytes(sink.getvalue())

    def make_options(self) -> dict[str, Any]:
        return {"path": str(self.folder()), "maxFilesPerTrigger": 1}


class TestTextFileSourceContract(_LocalFiles, SourceContract):
    source_class = TextFileSource
    suffix = ".txt"

    def make_schema(self) -> pa.Schema | None:
        return None

    def make_options(self) -> dict[str, Any]:
        return {"path": str(self.folder())}


class _MemoryFiles(_LocalFiles):
    """The same files on fsspec's memory:// filesystem (listed at every trigger)."""

    folder_name = ""
    in_process_only = "memory:// files live in the memory of the process that wrote them"

    def memory_folder(self) -> str:
        if not self.folder_name:
            self.folder_name = f"/contract-{uuid.uuid4().hex}"
            fsspec.filesystem("memory").makedirs(self.folder_name, exist_ok=True)
        return self.folder_name

    def produce(self, reader: StreamReader) -> None:
        fs = fsspec.filesystem("memory")
        for _ in range(3):
            start = type(self).produced * 10
            type(self).produced += 1
            fs.pipe(
                f"{self.memory_folder()}/part-{start:05d}{self.suffix}",
                self.content(_rows(start, 4)),
            )


class TestJsonMemoryFileSourceContract(_MemoryFiles, SourceContract):
    source_class = JsonFileSource

    def make_options(self) -> dict[str, Any]:
        return {"path": f"memory://{self.memory_folder()}", "maxBytesPerTrigger": 150}


class TestCsvMemoryFileSourceContract(_MemoryFiles, SourceContract):
    source_class = CsvFileSource
    suffix = ".csv"

    def content(self, rows: list[dict[str, Any]]) -> bytes:
        return b"id,name\n" + b"".join(f"{r['id']},{r['name']}\n".encode() for r in rows)

    def make_options(self) -> dict[str, Any]:
        return {"path": f"memory://{self.memory_folder()}", "header": True, "maxFilesPerTrigger": 2}

    def bad_options(self) -> list[tuple[dict[str, Any], str]]:
        path = f"memory://{self.memory_folder()}"
        return [
            ({"path": path, "lineSep": ""}, "lineSep"),
            ({"path": path, "sep": ";", "delimiter": "|"}, "give only one"),
            ({"path": path, "sep": "\\x"}, "Unsupported special character for delimiter"),
        ]


def test_public_names_and_registration() -> None:
    import microbatch as mb
    from microbatch_file import sources

    assert sorted(sources.__all__) == [
        "CsvFileSource",
        "FileSource",
        "FileSplit",
        "JsonFileSource",
        "OrcFileSource",
        "ParquetFileSource",
        "SOURCES",
        "TextFileSource",
    ]
    registry = mb.Session().registry
    for cls in sources.SOURCES:
        assert registry.find("source", cls.format_name).cls is cls
    assert [cls.format_name for cls in sources.SOURCES] == ["json", "csv", "text", "parquet", "orc"]
