"""The JSON and CSV sources against PySpark's own readers, case by case.

Each case of ``spark/reader_cases.py`` is a small file, a schema and reader options; PySpark's
result (rows and types, or the error of a FAILFAST read) is recorded in
``spark/recorded/<name>.json`` by ``spark/record_spark_readers.py`` (see ``spark/README.md``).
Here the same file is read with ``session.read``, and as the one micro-batch of a streaming
query, and compared row by row and type by type.
Where we differ from Spark on purpose, :data:`DIFFERENCES` says why and what we return
instead; the file connector's README lists the same differences.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import microbatch as mb
from microbatch.errors import OptionError, SourceError
from microbatch.types import parse_ddl

RECORDED = Path(__file__).parent / "spark" / "recorded"
RECORDINGS = sorted(RECORDED.glob("*.json"))

SPARK_TYPES = {
    "string": pa.string(),
    "int": pa.int32(),
    "bigint": pa.int64(),
    "smallint": pa.int16(),
    "tinyint": pa.int8(),
    "double": pa.float64(),
    "float": pa.float32(),
    "boolean": pa.bool_(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "timestamp_ntz": pa.timestamp("us"),
    "binary": pa.binary(),
}

DIFFERENCES: dict[str, tuple[str, list[list[Any]] | None]] = {
    "json_date_default": (
        "a JSON DATE is never a number of days since 1970: Spark reads the string 20240301 as "
        "the year 57386",
        [["2024-03-01"], ["2024-03-01"], ["2024-03-01"], ["2024-03-01"], ["2024-03-01"], [None]],
    ),
    "json_ts_default_invalid": (
        "a JSON number is never a TIMESTAMP: Spark reads 1709294400 as epoch seconds, which "
        "milliseconds silently become too",
        [[1, None], [2, None], [3, None], [4, None], [5, None], [6, None]],
    ),
    "csv_enc_utf16le": (
        "a CSV file in UTF-16 is decoded, then split into lines: Spark splits its bytes at "
        "line feeds first, and decodes garbage after the first line",
        [["café", 1], ["naïve", 2], ["Ångström", 3]],
    ),
    "json_enc_utf16le_detected_lines": (
        "JSON Lines without encoding are UTF-8: Spark lets Jackson guess each line's charset "
        "after splitting the bytes at line feeds (two of four lines read); set encoding and "
        "lineSep",
        [[None, None], [None, None], [None, None], [None, None]],
    ),
}
"""Cases where we return something else than Spark on purpose: the reason, and our rows
(None: the same rows as Spark except where the reason says)."""

ERROR_TEXTS = {
    "MALFORMED_CSV_RECORD": "MALFORMED_CSV_RECORD",
    "com.univocity.parsers.common.TextParsingException": "MALFORMED_CSV_RECORD",
    "_LEGACY_ERROR_TEMP_3241": "CSV header does not conform to the schema",
    "INVALID_PARAMETER_VALUE.CHARSET": "INVALID_PARAMETER_VALUE.CHARSET",
}
"""What our error says where Spark fails a read with another error than
MALFORMED_RECORD_IN_PARSING (by the recorded error class)."""


def canonical(value: Any, dtype: pa.DataType) -> Any:
    """A value as the recordings write it."""
    if value is None:
        return None
    if pa.types.is_timestamp(dtype):
        text = value.strftime("%Y-%m-%dT%H:%M:%S.%f")
        return text + "Z" if dtype.tz is not None else text
    if pa.types.is_date(dtype):
        return value.isoformat()
    if isinstance(value, float):
        if value != value:
            return "NaN"
        if value in (float("inf"), float("-inf")):
            return "Infinity" if value > 0 else "-Infinity"
        return value
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(dtype, pa.MapType):
        return [[key, canonical(item, dtype.item_type)] for key, item in value]
    if isinstance(dtype, pa.ListType):
        return [canonical(item, dtype.value_type) for item in value]
    if isinstance(dtype, pa.StructType):
        return {f.name: canonical(value[f.name], f.type) for f in dtype}
    return value


def spark_type(name: str) -> pa.DataType:
    """The type of a Spark ``simpleString`` (``int``, ``array<struct<x:int>>``...)."""
    return SPARK_TYPES.get(name) or parse_ddl(f"c {name}").field(0).type


def read(case: dict[str, Any], folder: Path, how: str = "batch") -> pa.Table:
    """The case's file read with ``session.read`` (``how="batch"``), or by a streaming query
    into the memory sink, whose one micro-batch is returned (``how="stream"``)."""
    data = folder / "in"
    data.mkdir()
    path = data / f"data.{case['format']}"
    path.write_bytes(case["input"].encode("latin-1" if case.get("raw_bytes") else "utf-8"))
    session = mb.Session()
    if how == "batch":
        reader = session.read.format(case["format"]).schema(case["schema"])
        return reader.options(**case["options"]).load(str(path))
    stream = session.read_stream.format(case["format"]).schema(case["schema"])
    query = (
        stream.options(**case["options"])
        .option("settleTime", "0")  # (the file is complete: no waiting for writers)
        .load(str(data))
        .write_stream.format("memory")
        .query_name("recorded")
        .option("checkpointLocation", str(folder / "checkpoint"))
        .trigger(available_now=True)
        .start()
    )
    try:
        query.await_termination()
    except mb.StreamingQueryException as failed:
        raise SourceError(f"{failed} {failed.__cause__}") from failed
    batches = [p for p in query.recent_progress if p["numInputRows"]]
    table = session.table("recorded")
    assert len(batches) == (1 if table.num_rows else 0)
    return table


@pytest.mark.parametrize("how", ["batch", "stream"])
@pytest.mark.parametrize("recording", RECORDINGS, ids=[p.stem for p in RECORDINGS])
def test_the_source_reads_what_spark_reads(recording: Path, how: str, tmp_path: Path) -> None:
    case = json.loads(recording.read_text())
    if "error" in case:
        with pytest.raises((SourceError, OptionError)) as raised:
            read(case, tmp_path, how)
        wanted = ERROR_TEXTS.get(case["error"]["class"], "MALFORMED_RECORD_IN_PARSING")
        assert wanted in str(raised.value), raised.value
        return
    table = read(case, tmp_path, how)
    assert table.column_names == case["columns"]
    expected_types = [spark_type(name) for name in case["types"]]
    assert table.schema.types == expected_types
    rows = [
        [
            canonical(value, dtype)
            for value, dtype in zip(row.values(), table.schema.types, strict=True)
        ]
        for row in table.to_pylist()
    ]
    difference = DIFFERENCES.get(case["name"])
    expected = case["rows"] if difference is None or difference[1] is None else difference[1]
    assert rows == expected
