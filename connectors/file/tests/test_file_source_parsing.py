"""Parse modes on real files mixing good and malformed lines; CSV, text and multi-line JSON."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.json as pajson
import pytest
from file_connector_helpers import make_source, open_reader, read_range

from microbatch import ReadAllAvailable
from microbatch.errors import SourceError
from microbatch.spark_json import SparkJsonReader
from microbatch_file import _formats
from microbatch_file.sources import CsvFileSource, FileSource, JsonFileSource, TextFileSource

JSON_LINES = (
    b'{"a": 1, "b": "x"}\n'
    b'{"a": "notint", "b": "y"}\n'
    b"\n"
    b"{broken json\n"
    b'{"a": 4, "b": "caf\xc3\xa9"}\n'
    b'{"a": 5, "b": "bad \xff utf8"}\n'
    b'{"a": 6, "b": "trunc'  # truncated last line, no newline
)


def read_all(
    cls: type[FileSource], path: Path, schema: pa.Schema | None, **options: Any
) -> list[dict[str, Any]]:
    source = open_reader(cls, {"path": str(path), **options}, schema=schema)
    start = source.initial_offset()
    end = source.latest_offset(start, ReadAllAvailable())
    return [row for b in read_range(source, start, end) for row in b.to_pylist()]


@pytest.fixture
def json_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "mixed.json").write_bytes(JSON_LINES)
    return folder


def test_json_permissive_keeps_good_values_and_the_raw_line(json_folder: Path) -> None:
    schema = pa.schema([("a", pa.int64()), ("b", pa.string()), ("_corrupt_record", pa.string())])
    rows = read_all(JsonFileSource, json_folder, schema)
    assert rows == [
        {"a": 1, "b": "x", "_corrupt_record": None},
        {"a": None, "b": "y", "_corrupt_record": '{"a": "notint", "b": "y"}'},
        {"a": None, "b": None, "_corrupt_record": "{broken json"},
        {"a": 4, "b": "café", "_corrupt_record": None},
        {"a": None, "b": None, "_corrupt_record": '{"a": 5, "b": "bad \ufffd utf8"}'},
        {"a": None, "b": None, "_corrupt_record": '{"a": 6, "b": "trunc'},
    ]


def test_json_permissive_without_the_corrupt_column_nulls_bad_values(json_folder: Path) -> None:
    rows = read_all(JsonFileSource, json_folder, pa.schema([("a", pa.int64())]))
    assert [row["a"] for row in rows] == [1, None, None, 4, None, None]


def test_json_corrupt_column_with_another_name(json_folder: Path) -> None:
    schema = pa.schema([("a", pa.int64()), ("raw", pa.string())])
    rows = read_all(JsonFileSource, json_folder, schema, columnNameOfCorruptRecord="raw")
    assert rows[2] == {"a": None, "raw": "{broken json"}


def test_json_dropmalformed_keeps_only_good_lines(json_folder: Path) -> None:
    schema = pa.schema([("a", pa.int64()), ("b", pa.string())])
    rows = read_all(JsonFileSource, json_folder, schema, mode="DROPMALFORMED")
    assert rows == [{"a": 1, "b": "x"}, {"a": 4, "b": "café"}]


def test_json_failfast_names_the_file_and_line(json_folder: Path) -> None:
    schema = pa.schema([("a", pa.int64()), ("b", pa.string())])
    with pytest.raises(SourceError) as caught:
        read_all(JsonFileSource, json_folder, schema, mode="FAILFAST")
    message = str(caught.value)
    assert f"file:{json_folder / 'mixed.json'} at line 2" in message
    assert "notint" in message and "FAILFAST" in message


def test_json_failfast_reports_invalid_utf8_and_truncation(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.json").write_bytes(b'{"a": 1}\n{"a": 2, "b": "\xff"}\n')
    schema = pa.schema([("a", pa.int64()), ("b", pa.string())])
    with pytest.raises(SourceError, match=r"a\.json at line 2.*UTF-8"):
        read_all(JsonFileSource, folder, schema, mode="FAILFAST")
    (folder / "a.json").write_bytes(b'{"a": 1}\n{"a": 2}\n{"a": 3')
    with pytest.raises(SourceError, match=r"a\.json at line 3"):
        read_all(JsonFileSource, folder, schema, mode="FAILFAST")


def test_clean_json_takes_the_fast_path(json_folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (json_folder / "mixed.json").write_bytes(b'{"a": 1}\n\n{"a": 2, "other": [1]}\r\n')
    calls = []
    read_json = pajson.read_json

    def no_fallback(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a clean file must be read by one pyarrow.json.read_json call")

    def counted(*args: Any, **kwargs: Any) -> pa.Table:
        calls.append(args)
        return read_json(*args, **kwargs)

    monkeypatch.setattr(SparkJsonReader, "read", no_fallback)
    monkeypatch.setattr(pajson, "read_json", counted)
    assert read_all(JsonFileSource, json_folder, pa.schema([("a", pa.int64())])) == [
        {"a": 1},
        {"a": 2},
    ]
    assert len(calls) == 1


def test_line_numbers_count_across_blocks(
    json_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = [b'{"a": %d}' % i for i in range(200)]
    lines[150] = b'{"a": oops}'
    (json_folder / "mixed.json").write_bytes(b"\n".join(lines) + b"\n")
    monkeypatch.setattr(_formats, "BLOCK_SIZE", 64)
    schema = pa.schema([("a", pa.int64())])
    assert len(read_all(JsonFileSource, json_folder, schema, mode="DROPMALFORMED")) == 199
    with pytest.raises(SourceError, match="at line 151"):
        read_all(JsonFileSource, json_folder, schema, mode="FAILFAST")


def test_json_multiline_documents(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "one.json").write_text('{\n  "a": 1,\n  "b": "x"\n}\n')
    (folder / "many.json").write_text('[\n {"a": 2},\n {"a": "no"}\n]\n')
    (folder / "bad.json").write_text('{\n  "a": 3,\n')
    schema = pa.schema([("a", pa.int64()), ("_corrupt_record", pa.string())])
    rows = read_all(JsonFileSource, folder, schema, multiLine=True)
    many = '[\n {"a": 2},\n {"a": "no"}\n]\n'  # one record: each row keeps its whole text
    assert sorted(rows, key=str) == sorted(
        [
            {"a": 1, "_corrupt_record": None},
            {"a": 2, "_corrupt_record": many},
            {"a": None, "_corrupt_record": many},
            {"a": None, "_corrupt_record": '{\n  "a": 3,\n'},
        ],
        key=str,
    )
    (folder / "many.json").unlink()
    with pytest.raises(SourceError, match=r"bad\.json at line 3"):
        read_all(JsonFileSource, folder, schema.remove(1), multiLine=True, mode="FAILFAST")
    (folder / "bad.json").write_text('[{"a": 7}, {"a": "no"}]')
    with pytest.raises(SourceError, match=r"bad\.json \(parse .*cannot read \"no\" as BIGINT"):
        read_all(JsonFileSource, folder, schema.remove(1), multiLine=True, mode="FAILFAST")


# -- CSV -------------------------------------------------------------------------------------
CSV_SCHEMA = pa.schema([("id", pa.int32()), ("name", pa.string()), ("score", pa.float64())])


@pytest.fixture
def csv_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "mixed.csv").write_bytes(
        b"id,name,score\n"
        b"1,alice,1.5\n"
        b"2,bob\n"  # a missing column
        b"x,carol,3.0\n"  # a value of the wrong type
        b'4,"dave, jr",4.0\n'
        b"5,\xffbad,5.0\n"  # invalid UTF-8: replaced, as Spark decodes it
        b"6,frank,6"  # last line without a newline: still a whole record
    )
    return folder


def test_csv_permissive(csv_folder: Path) -> None:
    schema = CSV_SCHEMA.append(pa.field("_corrupt_record", pa.string()))
    rows = read_all(CsvFileSource, csv_folder, schema, header=True)
    assert rows == [
        {"id": 1, "name": "alice", "score": 1.5, "_corrupt_record": None},
        {"id": 2, "name": "bob", "score": None, "_corrupt_record": "2,bob"},
        {"id": None, "name": "carol", "score": 3.0, "_corrupt_record": "x,carol,3.0"},
        {"id": 4, "name": "dave, jr", "score": 4.0, "_corrupt_record": None},
        {"id": 5, "name": "\ufffdbad", "score": 5.0, "_corrupt_record": None},
        {"id": 6, "name": "frank", "score": 6.0, "_corrupt_record": None},
    ]


def test_csv_dropmalformed_and_failfast(csv_folder: Path) -> None:
    rows = read_all(CsvFileSource, csv_folder, CSV_SCHEMA, header=True, mode="DROPMALFORMED")
    assert [row["id"] for row in rows] == [1, 4, 5, 6]
    with pytest.raises(SourceError) as caught:
        read_all(CsvFileSource, csv_folder, CSV_SCHEMA, header=True, mode="FAILFAST")
    assert f"{csv_folder / 'mixed.csv'} at line 3" in str(caught.value)
    assert "the record has 2 value(s), the schema 3 column(s)" in str(caught.value)


def test_csv_dialect_options(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.csv").write_text("# a comment line\n1;'semi;colon';NA\n2;'it\\'s';7.5\n")
    rows = read_all(
        CsvFileSource,
        folder,
        CSV_SCHEMA,
        sep=";",
        quote="'",
        escape="\\",
        nullValue="NA",
        comment="#",
    )
    assert rows == [
        {"id": 1, "name": "semi;colon", "score": None},
        {"id": 2, "name": "it's", "score": 7.5},
    ]


def test_csv_inferred_schema_uses_the_header(csv_folder: Path) -> None:
    (csv_folder / "mixed.csv").write_text("id,name\n1,a\n2,b\n")
    options = {"path": str(csv_folder), "header": True, "schemaInference": True}
    source = make_source(CsvFileSource, {**options, "inferSchema": True}, streaming=True)
    assert source.schema() == pa.schema([("id", pa.int64()), ("name", pa.string())])
    source = make_source(CsvFileSource, options, streaming=True)
    assert source.schema() == pa.schema([("id", pa.string()), ("name", pa.string())])


# -- text ------------------------------------------------------------------------------------
def test_text_lines_and_whole_text(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.txt").write_bytes(b"first\r\n\nthird \xff\nlast")
    rows = read_all(TextFileSource, folder, None)
    assert rows == [
        {"value": "first"},
        {"value": ""},
        {"value": "third \ufffd"},
        {"value": "last"},
    ]
    whole = read_all(TextFileSource, folder, None, wholetext=True)
    assert whole == [{"value": "first\r\n\nthird \ufffd\nlast"}]
