"""Malformed input that used to crash the process or pass silently, read per parse mode.

pyarrow's JSON reader (26.0.1) kills the process (SIGSEGV) when a line ``null`` starts its
input or spans one of its 1 MiB block boundaries; those cases run in a child process, so a
crash fails the test instead of killing the test run.
"""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from file_connector_helpers import open_reader, read_range

import microbatch as mb
from microbatch import ReadAllAvailable
from microbatch.errors import SourceError
from microbatch_file.sources import CsvFileSource, FileSource, JsonFileSource

CHILD = r"""
import json, sys
import pyarrow as pa
from microbatch import ReadAllAvailable, ReadContext
from microbatch_file import _formats
from microbatch_file.sources import JsonFileSource

folder, mode, block, infer = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
if block:
    _formats.BLOCK_SIZE = block
options = {"path": folder, "mode": mode}
if infer:
    options["schemaInference"] = "true"
    schema = None
else:
    schema = pa.schema([("a", pa.int64()), ("_corrupt_record", pa.string())])
    if mode != "PERMISSIVE":
        schema = schema.remove(1)
parsed = JsonFileSource.options.parse(options, connector="json")
try:
    source = JsonFileSource(parsed, user_schema=schema, streaming=False)
    reader = source.stream_reader(ReadContext(schema=source.schema(), streaming=False))
    start = reader.initial_offset()
    end = reader.latest_offset(start, ReadAllAvailable())
    split_reader = reader.split_reader()
    rows = [r for s in reader.partitions(start, end) for b in split_reader.read(s)
            for r in b.to_pylist()]
    out = {"rows": rows, "dropped": reader.metrics().get("numRowsDroppedByParseMode"),
           "schema": reader.schema.names}
except Exception as error:
    out = {"error": f"{type(error).__name__}: {error}"}
print(json.dumps(out))
"""

GOOD = b'{"a": 1}\n'


def read_in_child(
    folder: Path, mode: str, block: int = 0, infer: bool = False, timeout: float = 60
) -> dict[str, Any]:
    """What reading ``folder`` gives in a child process; a crash fails the test."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(folder), mode, str(block), "1" if infer else "0"],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, (
        f"the reading process died with exit code {done.returncode} (a negative code is a "
        f"signal: -11 is SIGSEGV)\n{done.stderr[-2000:]}"
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# Each case: the file's bytes, the line number of its only malformed line, that line's text,
# the number of good rows and the block size of the file reader (0 for the default).
CRASHING = {
    "null first line": (b"null\n" + GOOD * 3, 1, "null", 3, 0),
    "blank then null": (b" null\n" + GOOD * 3, 1, " null", 3, 0),
    "tab and CR then null": (b"\t\r null \n" + GOOD * 3, 2, " null ", 3, 0),  # CR ends a line
    "byte-order mark then null": (b"\xef\xbb\xbfnull\n" + GOOD, 1, "\ufeffnull", 1, 0),
    "blank lines then null": (b"\n\n  \nnull\n" + GOOD, 4, "null", 1, 0),
    "null and more on the line": (b'null {"a": 2}\n' + GOOD, 1, 'null {"a": 2}', 1, 0),
    "nullx": (b"nullx\n" + GOOD, 1, "nullx", 1, 0),
    "first line of a later block": (GOOD * 20 + b"null\n" + GOOD * 20, 21, "null", 40, 64),
    # 116,508 lines of 9 bytes end 4 bytes before pyarrow's 1 MiB block boundary
    "a line across a block boundary of pyarrow's reader": (
        GOOD * 116_508 + b"null\n" + GOOD * 1000,
        116_509,
        "null",
        117_508,
        0,
    ),
}


def _internal_block_file(path: Path) -> None:
    # 20 null lines around the first 1 MiB block boundary of pyarrow's reader
    path.write_bytes(GOOD * 116_500 + b"null\n" * 20 + GOOD * 1000)


def _read_crashing_case(tmp_path: Path, case: str, mode: str) -> dict[str, Any]:
    """Writes the data of ``CRASHING[case]`` to ``f.json`` and reads it in a child in ``mode``."""
    data, _, _, _, block = CRASHING[case]
    (tmp_path / "f.json").write_bytes(data)
    return read_in_child(tmp_path, mode, block)


@pytest.mark.parametrize("case", list(CRASHING))
def test_a_null_line_at_a_block_start_is_a_corrupt_record_not_a_crash(
    tmp_path: Path, case: str
) -> None:
    data, line, text, good, _ = CRASHING[case]
    result = _read_crashing_case(tmp_path, case, "PERMISSIVE")
    rows = result["rows"]
    assert len(rows) == good + 1
    corrupt = [row for row in rows if row["_corrupt_record"] is not None]
    assert corrupt == [{"a": None, "_corrupt_record": text}]
    before = sum(1 for earlier in re.split(rb"\r\n|\r|\n", data)[: line - 1] if earlier.strip())
    assert rows[before] == corrupt[0]  # in its place among the good rows


@pytest.mark.parametrize("case", list(CRASHING))
def test_a_null_line_at_a_block_start_is_dropped_and_counted(tmp_path: Path, case: str) -> None:
    _, _, _, good, _ = CRASHING[case]
    result = _read_crashing_case(tmp_path, case, "DROPMALFORMED")
    assert len(result["rows"]) == good
    assert all(row["a"] is not None for row in result["rows"])
    assert result["dropped"] == "1"


@pytest.mark.parametrize("case", list(CRASHING))
def test_a_null_line_at_a_block_start_fails_fast_naming_file_and_line(
    tmp_path: Path, case: str
) -> None:
    _, line, _, _, _ = CRASHING[case]
    result = _read_crashing_case(tmp_path, case, "FAILFAST")
    assert "MalformedRecordError" in result["error"]
    assert f"f.json at line {line} " in result["error"]


def test_several_null_lines_around_pyarrow_block_boundaries(tmp_path: Path) -> None:
    _internal_block_file(tmp_path / "f.json")
    result = read_in_child(tmp_path, "DROPMALFORMED")
    assert len(result["rows"]) == 117_500
    assert result["dropped"] == "20"


def test_schema_inference_survives_null_lines_and_deep_nesting(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_bytes(b"null\n" + b'{"a": 1}\n')
    deep = b'{"b": ' + b"[" * 40_000 + b"]" * 40_000 + b"}\n"
    (tmp_path / "b.json").write_bytes(deep + b'{"a": 2}\n')
    result = read_in_child(tmp_path, "DROPMALFORMED", infer=True)
    assert result["schema"] == ["a"]
    values = [row["a"] for row in result["rows"]]
    assert sorted(v for v in values if v is not None) == [1, 2]  # the deep line has no "a"


# -- in process: inputs that did not crash but were read wrongly ------------------------------
def read_all(cls: type[FileSource], path: Path, schema: pa.Schema, **options: Any) -> Any:
    source = open_reader(cls, {"path": str(path), **options}, schema=schema)
    start = source.initial_offset()
    end = source.latest_offset(start, ReadAllAvailable())
    rows = [r for b in read_range(source, start, end) for r in b.to_pylist()]
    return rows, source


def test_a_null_line_inside_a_clean_block_is_a_corrupt_record(tmp_path: Path) -> None:
    (tmp_path / "f.json").write_bytes(b'{"a": 1}\n{"a": 2}\nnull\n{"a": 3}\n')
    schema = pa.schema([("a", pa.int64()), ("_corrupt_record", pa.string())])
    rows, _ = read_all(JsonFileSource, tmp_path, schema)
    assert rows == [
        {"a": 1, "_corrupt_record": None},
        {"a": 2, "_corrupt_record": None},
        {"a": None, "_corrupt_record": "null"},
        {"a": 3, "_corrupt_record": None},
    ]
    rows, source = read_all(JsonFileSource, tmp_path, schema.remove(1), mode="DROPMALFORMED")
    assert rows == [{"a": 1}, {"a": 2}, {"a": 3}]
    assert source.metrics()["numRowsDroppedByParseMode"] == "1"
    with pytest.raises(SourceError, match=r"f\.json at line 3 .*expected a JSON object"):
        read_all(JsonFileSource, tmp_path, schema.remove(1), mode="FAILFAST")


def test_dropped_lines_are_counted_in_progress_and_logged_with_file_and_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    source = tmp_path / "in"
    source.mkdir()
    (source / "a.json").write_bytes(b'{"a": 1}\n{broken\n{"a": 2}\n{"a": "x"}\n')
    session = mb.Session()
    frame = (
        session.read_stream.format("json")
        .schema("a BIGINT")
        .option("mode", "DROPMALFORMED")
        .load(str(source))
    )
    with caplog.at_level(logging.WARNING):
        query = frame.write_stream.format("memory").query_name("dropped").trigger(once=True)
        query = query.start()
        query.await_termination()
    assert sorted(session.table("dropped").column("a").to_pylist()) == [1, 2]
    assert query.last_progress["sources"][0]["metrics"]["numRowsDroppedByParseMode"] == "2"
    logged = [r.getMessage() for r in caplog.records if "DROPMALFORMED" in r.getMessage()]
    assert any("a.json" in m and "line 2" in m and "Dropped 2" in m for m in logged), logged


def test_dropped_lines_are_counted_across_reader_threads(tmp_path: Path) -> None:
    for index in range(24):
        (tmp_path / f"f{index:02}.json").write_bytes((b'{"a": 1}\n{bad\n') * 50)
    schema = pa.schema([("a", pa.int64())])
    source = open_reader(
        JsonFileSource, {"path": str(tmp_path), "mode": "DROPMALFORMED"}, schema=schema
    )
    start = source.initial_offset()
    end = source.latest_offset(start, ReadAllAvailable())
    splits = list(source.partitions(start, end))
    split_reader = source.split_reader()
    with ThreadPoolExecutor(8) as pool:
        counts = list(pool.map(lambda s: sum(b.num_rows for b in split_reader.read(s)), splits * 4))
    assert sum(counts) == 4 * 24 * 50
    assert source.metrics()["numRowsDroppedByParseMode"] == str(4 * 24 * 50)


def test_csv_unterminated_quote_ends_with_its_line_as_in_spark(tmp_path: Path) -> None:
    """Without multiLine a quote left open ends with its line, and the record is well-formed
    (Spark 4 reads it so; it used to be malformed here)."""
    (tmp_path / "f.csv").write_bytes(b'1,a\n4,"unterminated\n5,b\n6,"open at the end\n')
    schema = pa.schema([("id", pa.int64()), ("name", pa.string())])
    with_corrupt = schema.append(pa.field("_corrupt_record", pa.string()))
    rows, _ = read_all(CsvFileSource, tmp_path, with_corrupt)
    assert rows == [
        {"id": 1, "name": "a", "_corrupt_record": None},
        {"id": 4, "name": "unterminated", "_corrupt_record": None},
        {"id": 5, "name": "b", "_corrupt_record": None},
        {"id": 6, "name": "open at the end", "_corrupt_record": None},
    ]
    rows, _ = read_all(CsvFileSource, tmp_path, schema, mode="FAILFAST")
    assert len(rows) == 4
    rows, _ = read_all(CsvFileSource, tmp_path, schema, multiLine=True)
    assert rows == [
        {"id": 1, "name": "a"},
        {"id": 4, "name": '"unterminated\n5,b\n6,"open at the end'},
    ]


def test_json_float_out_of_range_is_infinity_as_in_spark(tmp_path: Path) -> None:
    (tmp_path / "f.json").write_bytes(b'{"f": 1.5}\n{"f": 1e39}\n{"f": -1e39}\n{"f": 3.4e38}\n')
    schema = pa.schema([("f", pa.float32()), ("_corrupt_record", pa.string())])
    rows, _ = read_all(JsonFileSource, tmp_path, schema, mode="FAILFAST")
    assert [r["f"] for r in rows][:3] == [1.5, float("inf"), float("-inf")]
    assert rows[3]["f"] == pytest.approx(3.4e38)
    assert [r["_corrupt_record"] for r in rows] == [None] * 4


def test_csv_float_out_of_range_is_infinity_as_in_spark(tmp_path: Path) -> None:
    """Java's Float.parseFloat gives infinity beyond the float range, and so does Spark (this
    used to be malformed here)."""
    (tmp_path / "f.csv").write_bytes(b"1.5\n1e39\n-1e39\n3.4e38\n")
    schema = pa.schema([("f", pa.float32()), ("_corrupt_record", pa.string())])
    rows, _ = read_all(CsvFileSource, tmp_path, schema, mode="FAILFAST")
    assert [r["f"] for r in rows][:3] == [1.5, float("inf"), float("-inf")]
    assert rows[3]["f"] == pytest.approx(3.4e38)
    assert [r["_corrupt_record"] for r in rows] == [None] * 4


def test_timestamp_ntz_with_an_offset_is_malformed_not_shifted(tmp_path: Path) -> None:
    (tmp_path / "f.json").write_bytes(
        b'{"t": "2024-05-01T10:00:00"}\n'
        b'{"t": "2024-05-01T10:00:00+02:00"}\n'
        b'{"t": "2024-05-01T10:00:00Z"}\n'
    )
    schema = pa.schema([("t", pa.timestamp("us")), ("_corrupt_record", pa.string())])
    rows, _ = read_all(JsonFileSource, tmp_path, schema)
    assert [r["t"] and r["t"].isoformat() for r in rows] == ["2024-05-01T10:00:00", None, None]
    assert [r["_corrupt_record"] is not None for r in rows] == [False, True, True]
    with pytest.raises(SourceError, match=r"f\.json at line 2 .*as TIMESTAMP_NTZ"):
        read_all(JsonFileSource, tmp_path, schema.remove(1), mode="FAILFAST")
    # a TIMESTAMP (with a time zone) still reads the offset, as an instant
    tz = pa.schema([("t", pa.timestamp("us", tz="UTC"))])
    rows, _ = read_all(JsonFileSource, tmp_path, tz)
    assert [r["t"].isoformat() for r in rows][1] == "2024-05-01T08:00:00+00:00"


def test_a_null_document_of_a_multiline_file_is_a_corrupt_record(tmp_path: Path) -> None:
    """As in Spark, the file is one record: a null element makes all of it malformed."""
    (tmp_path / "f.json").write_text('[{"a": 1}, null, {"a": 2}]')
    schema = pa.schema([("a", pa.int64()), ("_corrupt_record", pa.string())])
    rows, _ = read_all(JsonFileSource, tmp_path, schema, multiLine=True)
    assert rows == [{"a": None, "_corrupt_record": '[{"a": 1}, null, {"a": 2}]'}]
    rows, source = read_all(
        JsonFileSource, tmp_path, schema.remove(1), multiLine=True, mode="DROPMALFORMED"
    )
    assert rows == []
    assert source.metrics()["numRowsDroppedByParseMode"] == "1"


QUERY_CHILD = r"""
import json, sys
import microbatch as mb

folder, checkpoint, mode = sys.argv[1], sys.argv[2], sys.argv[3]
session = mb.Session()
schema = "a BIGINT, _corrupt_record STRING" if mode == "PERMISSIVE" else "a BIGINT"
frame = session.read_stream.format("json").schema(schema).option("mode", mode).load(folder)
query = (
    frame.write_stream.format("memory").query_name("out")
    .option("checkpointLocation", checkpoint).trigger(available_now=True).start()
)
try:
    query.await_termination(timeout=60)
    print(json.dumps({"rows": session.table("out").to_pylist()}))
except mb.MicrobatchError as error:
    print(json.dumps({"error": str(error)[:400]}))
"""


@pytest.mark.parametrize("mode", ["PERMISSIVE", "FAILFAST"])
def test_a_streaming_query_over_a_null_first_line_does_not_die(tmp_path: Path, mode: str) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "f.json").write_bytes(b"null\n" + GOOD)
    command = [sys.executable, "-c", QUERY_CHILD, str(folder), str(tmp_path / "cp"), mode]
    expected = [{"a": None, "_corrupt_record": "null"}, {"a": 1, "_corrupt_record": None}]
    for run in range(2):  # after a failure the batch is replayed: it must not crash either
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"exit code {done.returncode}\n{done.stderr[-2000:]}"
        result = json.loads(done.stdout.strip().splitlines()[-1])
        if mode == "PERMISSIVE":
            assert result["rows"] == (expected if run == 0 else [])  # then committed
        else:
            assert "f.json at line 1" in result["error"]
