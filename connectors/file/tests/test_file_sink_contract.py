"""The testkit's sink suite, run on the parquet, json and csv file sinks, local and in memory."""

from __future__ import annotations

import uuid
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pyarrow.parquet as pq
import pytest

from microbatch import StreamWriter
from microbatch_file.manifest import Manifest
from microbatch_file.sinks import CsvFileSink, FileStreamWriter, JsonFileSink, ParquetFileSink
from microbatch_testkit import SinkContract, data


def _committed_files(sink: StreamWriter) -> list[str]:
    assert isinstance(sink, FileStreamWriter)
    return Manifest(sink.fs, sink.root).files()


def _read_all(sink: StreamWriter, read_one: Any) -> pa.Table:
    schema = sink.context.schema
    tables = [read_one(sink, path, schema) for path in _committed_files(sink)]
    if not tables:
        return schema.empty_table()
    return pa.concat_tables(tables)


def _parquet(sink: StreamWriter, path: str, schema: pa.Schema) -> pa.Table:
    assert isinstance(sink, FileStreamWriter)
    with sink.fs.open(path, "rb") as handle:
        return pq.read_table(handle, schema=schema)


def _json(sink: StreamWriter, path: str, schema: pa.Schema) -> pa.Table:
    assert isinstance(sink, FileStreamWriter)
    with sink.fs.open(path, "rb") as handle:
        options = pajson.ParseOptions(explicit_schema=schema)
        return pajson.read_json(handle, parse_options=options).cast(schema)


def _csv(sink: StreamWriter, path: str, schema: pa.Schema) -> pa.Table:
    assert isinstance(sink, FileStreamWriter)
    with sink.fs.open(path, "rb") as handle:
        return pacsv.read_csv(
            handle,
            read_options=pacsv.ReadOptions(column_names=schema.names),
            convert_options=pacsv.ConvertOptions(
                column_types=schema, strings_can_be_null=True, quoted_strings_can_be_null=False
            ),
        ).cast(schema)


class _FileSinkContract(SinkContract):
    """The suite on one file sink: it writes to ``out`` in the test's folder and is read back
    through the manifest with :attr:`read_one`."""

    __test__ = False
    read_one: Any

    def make_options(self) -> dict[str, Any]:
        return {"path": str(self.tmp_path / "out")}

    def read_back(self, sink: StreamWriter) -> pa.Table:
        return _read_all(sink, type(self).read_one)

    def bad_values(self) -> list[tuple[dict[str, Any], str]]:
        """Options that each make the sink refuse, with what the error names (beside ``path``)."""
        return []

    def bad_options(self) -> list[tuple[dict[str, Any], str]]:
        path = self.make_options()["path"]
        return [({"path": path, **options}, names) for options, names in self.bad_values()]


class TestParquetFileSinkContract(_FileSinkContract):
    sink_class = ParquetFileSink
    read_one = _parquet

    def bad_options(self) -> list[tuple[dict[str, Any], str]]:
        return [({}, "path"), *super().bad_options()]

    def bad_values(self) -> list[tuple[dict[str, Any], str]]:
        return [
            ({"compression": "lzo"}, "compression"),
            ({"maxRecordsPerFile": -1}, "maxRecordsPerFile"),
            ({"rowGroupSize": 0}, "rowGroupSize"),
        ]


class TestParquetFileSinkInMemoryContract(_FileSinkContract):
    sink_class = ParquetFileSink
    read_one = _parquet
    in_process_only = "memory:// files live in the memory of the process that wrote them"

    def make_options(self) -> dict[str, Any]:
        if not hasattr(self, "_folder"):
            self._folder = f"memory://contract-{uuid.uuid4().hex}"
        return {"path": self._folder}

    def bad_values(self) -> list[tuple[dict[str, Any], str]]:
        return [({"targetFileSize": "big"}, "targetFileSize")]

    def test_commit_is_atomic_when_killed(self) -> None:
        # The check commits in child processes; what a child writes to memory:// stays in its
        # own memory. The local-folder classes run it.
        pytest.skip(f"in_process_only: {self.in_process_only}")


class TestJsonFileSinkContract(_FileSinkContract):
    sink_class = JsonFileSink
    read_one = _json

    def bad_values(self) -> list[tuple[dict[str, Any], str]]:
        return [
            ({"compression": "snappy"}, "compression"),
            ({"ignoreNullFields": "sometimes"}, "ignoreNullFields"),
        ]


class TestCsvFileSinkContract(_FileSinkContract):
    sink_class = CsvFileSink
    read_one = _csv

    def input_schema(self) -> pa.Schema:
        return data.SIMPLE_SCHEMA

    def input_batches(self) -> list[pa.RecordBatch]:
        return data.simple_batches()

    def bad_values(self) -> list[tuple[dict[str, Any], str]]:
        return [
            ({"header": "maybe"}, "header"),
            ({"sep": ";;"}, "sep must be one character"),
            ({"nullValue": '"NA"'}, "nullValue"),
        ]
