"""The json file source decodes with the core's ``JsonDecoder``: its errors carry the decoder's
structured record, whose message is never cut out of another error's text."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from microbatch import ReadAllAvailable, ReadContext
from microbatch._transforms import ParseJson
from microbatch.errors import MalformedJsonError, SourceError
from microbatch.json_decoder import MalformedKind
from microbatch_file.sources import JsonFileSource

SCHEMA = pa.schema([("a", pa.int64()), ("b", pa.string())])


def read_all(folder: Path, schema: pa.Schema, **options: Any) -> list[dict[str, Any]]:
    parsed = JsonFileSource.options.parse({"path": str(folder), **options}, connector="json")
    source = JsonFileSource(parsed, user_schema=schema, streaming=False)
    reader = source.stream_reader(ReadContext(schema=source.schema(), streaming=False))
    start = reader.initial_offset()
    end = reader.latest_offset(start, ReadAllAvailable())
    split_reader = reader.split_reader()
    splits = reader.partitions(start, end)
    return [r for s in splits for b in split_reader.read(s) for r in b.to_pylist()]


def test_failfast_error_carries_the_record_with_its_line(tmp_path: Path) -> None:
    (tmp_path / "f.json").write_bytes(b'{"a": 1}\n\n{"a": 2}\n{"a": 3, "b": 4}\n')
    with pytest.raises(SourceError, match=r"f\.json at line 4 ") as caught:
        read_all(tmp_path, SCHEMA, mode="FAILFAST")
    cause = caught.value.__cause__
    assert isinstance(cause, MalformedJsonError)
    record = cause.record
    assert (record.row, record.line, record.kind, record.column) == (
        2,
        4,
        MalformedKind.BAD_VALUE,
        "b",
    )
    assert f": {record.message}. Fix or remove the line" in str(caught.value)


def test_failfast_reason_is_whole_when_the_value_looks_like_an_error_text(tmp_path: Path) -> None:
    """The reason used to be cut out of ``ParseJson``'s message at " (value: "."""
    (tmp_path / "f.json").write_bytes(b'{"a": 1}\n{"a": "of the batch:  (value: x"}\n')
    with pytest.raises(SourceError) as caught:
        read_all(tmp_path, SCHEMA, mode="FAILFAST")
    assert 'cannot read "of the batch:  (value: x" as BIGINT. Fix' in str(caught.value)


def test_the_file_source_and_parse_json_decode_alike(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    lines = [
        '{"a": 1, "b": "x"}',
        '{"a": "no", "b": "kept"}',
        "[1]",
        '{"a": 1.5}',
        '{"a": 4, "b": {"nested": 1}}',
        '{"a": 5} {"a": 6}',
        "null",
        '{"a": 7, "b": "\\u00e9"}',
    ]
    (tmp_path / "f.json").write_text("\n".join(lines) + "\n")
    with_corrupt = SCHEMA.append(pa.field("_corrupt_record", pa.string()))
    from_files = read_all(tmp_path, with_corrupt)
    batch = pa.record_batch({"value": lines})
    step = ParseJson("value", SCHEMA, corrupt_column="_corrupt_record")
    assert from_files == step.apply(batch).to_pylist()
    with caplog.at_level(logging.WARNING):
        dropped = read_all(tmp_path, SCHEMA, mode="DROPMALFORMED")
    assert dropped == ParseJson("value", SCHEMA, mode="DROPMALFORMED").apply(batch).to_pylist()
    assert dropped == [{"a": 1, "b": "x"}, {"a": 7, "b": "é"}]
    assert any("Dropped 6 malformed JSON line(s)" in r.getMessage() for r in caplog.records)
