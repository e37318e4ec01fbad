"""``microbatch.json_decoder``: malformed records reported as data, in every parse mode."""

from __future__ import annotations

import dataclasses
import json
import pickle

import pyarrow as pa
import pytest

from microbatch._transforms import ParseJson
from microbatch.errors import ConfigurationError, MalformedJsonError, SchemaError, TransformError
from microbatch.json_decoder import JsonDecoder, MalformedKind, MalformedRecord

SCHEMA = "a INT, b STRING"

# value, kind, column, position of the problem (None: not known / not applicable)
CASES: list[tuple[bytes | None, MalformedKind | None, str | None, int | None]] = [
    (b'{"a": 1, "b": "x"}', None, None, None),
    (b"{broken", MalformedKind.INVALID_JSON, None, 1),
    (b'{"a": 1, "b": "\xff"}', MalformedKind.INVALID_UTF8, None, 15),
    (b"[1, 2]", MalformedKind.NOT_AN_OBJECT, None, None),
    (b'{"a": "x", "b": "kept"}', MalformedKind.BAD_VALUE, "a", None),
    (b'{"a": 99999999999}', MalformedKind.OUT_OF_RANGE, "a", None),
    (b'{"a": 1} {"a": 2}', MalformedKind.INVALID_JSON, None, 9),
    (None, None, None, None),
    (b"   ", None, None, None),
    (b'"text"', MalformedKind.NOT_AN_OBJECT, None, None),
]


def values() -> pa.Array:
    return pa.array([value for value, *_ in CASES], pa.binary())


def expected() -> list[tuple[int, MalformedKind, str | None, int | None]]:
    return [
        (row, kind, column, position)
        for row, (_, kind, column, position) in enumerate(CASES)
        if kind is not None
    ]


def shape(records: tuple[MalformedRecord, ...]) -> list[tuple[object, ...]]:
    return [(r.row, r.kind, r.column, r.position) for r in records]


def test_each_malformed_record_is_reported_with_row_kind_column_and_position() -> None:
    result = JsonDecoder(SCHEMA, corrupt_column="_corrupt").decode_values(values())
    assert shape(result.malformed) == expected()
    assert result.records == len(CASES)
    assert not result.dropped
    assert result.table.column_names == ["a", "b", "_corrupt"]
    assert result.table.column("a").to_pylist() == [1] + [None] * 9
    assert result.table.column("b").to_pylist()[4] == "kept"  # readable values are kept
    corrupt = result.table.column("_corrupt").to_pylist()
    assert [row for row, text in enumerate(corrupt) if text is not None] == [
        row for row, *_ in expected()
    ]
    assert corrupt[2] == '{"a": 1, "b": "\ufffd"}'
    messages = {r.kind: r.message for r in result.malformed}
    assert messages[MalformedKind.BAD_VALUE] == "column 'a': cannot read \"x\" as INT"
    assert messages[MalformedKind.INVALID_UTF8] == "invalid UTF-8 at byte 15"
    assert messages[MalformedKind.NOT_AN_OBJECT].startswith("expected a JSON object, got ")
    assert all(r.line is None for r in result.malformed)


def test_records_are_plain_data() -> None:
    record = JsonDecoder(SCHEMA).decode_values(pa.array(['{"a": true}'])).malformed[0]
    data = dataclasses.asdict(record)
    assert json.loads(json.dumps(data)) == {
        "row": 0,
        "kind": "bad_value",
        "message": "column 'a': cannot read true as INT",
        "column": "a",
        "position": None,
        "line": None,
    }
    assert record.kind == "bad_value"  # a str as well


def test_dropmalformed_reports_every_dropped_record_and_a_mask_for_other_columns() -> None:
    offsets = pa.array(range(100, 100 + len(CASES)))
    result = JsonDecoder(SCHEMA, mode="dropmalformed").decode_values(values())
    assert result.dropped and result.table.num_rows == len(CASES) - len(expected())
    assert shape(result.malformed) == expected()
    assert all(r.message for r in result.malformed)
    kept = offsets.filter(result.kept_mask()).to_pylist()
    assert kept == [100, 107, 108]
    assert result.table.column("a").to_pylist() == [1, None, None]


def test_failfast_raises_the_first_record() -> None:
    with pytest.raises(MalformedJsonError) as caught:
        JsonDecoder(SCHEMA, mode="FAILFAST").decode_values(values())
    assert shape((caught.value.record,)) == expected()[:1]
    assert "at row 1 (parse mode FAILFAST): invalid JSON: Expecting" in str(caught.value)
    copy = pickle.loads(pickle.dumps(caught.value))
    assert copy.record == caught.value.record and str(copy) == str(caught.value)


def test_bad_rows_found_among_many_get_their_reasons() -> None:
    rows = [json.dumps({"a": i, "b": "x"}) for i in range(5000)]
    rows[10], rows[2500], rows[4999] = '{"a": "no"}', '{"a": 1.5}', '{"a": 1, "b": 2}'
    result = JsonDecoder(SCHEMA, mode="DROPMALFORMED").decode_values(pa.array(rows))
    assert [(r.row, r.kind, r.column) for r in result.malformed] == [
        (10, MalformedKind.BAD_VALUE, "a"),
        (2500, MalformedKind.BAD_VALUE, "a"),
        (4999, MalformedKind.BAD_VALUE, "b"),
    ]
    assert result.table.num_rows == 4997


def test_float_and_timestamp_ntz_problems_name_their_kind() -> None:
    decoder = JsonDecoder("f FLOAT, t TIMESTAMP_NTZ")
    found = decoder.decode_values(
        pa.array(['{"f": 1e39}', '{"t": "2024-05-01T10:00:00+02:00"}', '{"f": 1.5}'])
    ).malformed
    assert [(r.row, r.kind, r.column) for r in found] == [
        (0, MalformedKind.OUT_OF_RANGE, "f"),
        (1, MalformedKind.BAD_VALUE, "t"),
    ]
    assert "out of range for FLOAT" in found[0].message and "UTC offset" in found[1].message


@pytest.mark.parametrize("broken", [False, True])
def test_decode_lines_counts_rows_and_lines(broken: bool) -> None:
    lines = [b'{"a": 1}', b"", b'{"a": 2}\r', b"  ", b'{"a": 3}']
    if broken:
        lines[2] = b'{"a": "two"}'
    data = b"\n".join(lines) + b"\n"
    result = JsonDecoder(SCHEMA, corrupt_column="_c").decode_lines(data, first_line=41)
    assert result.records == 3
    assert result.table.column("a").to_pylist() == [1, None if broken else 2, 3]
    assert result.table.column("_c").to_pylist()[1] == ('{"a": "two"}' if broken else None)
    assert [(r.row, r.line, r.kind) for r in result.malformed] == (
        [(1, 43, MalformedKind.BAD_VALUE)] if broken else []
    )
    if broken:
        with pytest.raises(MalformedJsonError, match="at line 43 ") as caught:
            JsonDecoder(SCHEMA, mode="FAILFAST").decode_lines(data, first_line=41)
        assert (caught.value.record.row, caught.value.record.line) == (1, 43)


def test_decode_lines_of_a_null_line_is_a_record_not_a_crash() -> None:
    result = JsonDecoder(SCHEMA).decode_lines(b'{"a": 1}\nnull\n')
    assert [(r.row, r.line, r.kind) for r in result.malformed] == [
        (1, 2, MalformedKind.NOT_AN_OBJECT)
    ]


def test_empty_input() -> None:
    decoder = JsonDecoder(SCHEMA, corrupt_column="_c")
    for result in (
        decoder.decode_lines(b" \n\n"),
        decoder.decode_values(pa.array([], pa.string())),
    ):
        assert result.table.num_rows == 0 and result.malformed == () and result.records == 0
        assert result.table.column_names == ["a", "b", "_c"]


def test_a_decoder_pickles_and_keeps_its_settings() -> None:
    decoder = JsonDecoder("id BIGINT, m MAP<STRING, INT>", "DROPMALFORMED", "_c")
    copy = pickle.loads(pickle.dumps(decoder))
    assert (copy.schema, copy.mode, copy.corrupt_column) == (
        decoder.schema,
        "DROPMALFORMED",
        "_c",
    )
    batch = pa.array(['{"id": 1, "m": {"k": 2}}', '{"id": "x"}'])
    assert copy.decode_values(batch) == decoder.decode_values(batch)
    assert "mode='DROPMALFORMED'" in repr(copy)


def test_configuration_errors() -> None:
    with pytest.raises(ConfigurationError, match="Unknown JSON parse mode 'LENIENT'"):
        JsonDecoder(SCHEMA, mode="LENIENT")
    with pytest.raises(ConfigurationError, match="'a' is also a column of the schema"):
        JsonDecoder(SCHEMA, corrupt_column="a")
    with pytest.raises(SchemaError, match="Column 'm': MAP<INT, STRING> cannot hold"):
        JsonDecoder("m MAP<INT, STRING>")
    with pytest.raises(TypeError, match="string or binary values, not int64"):
        JsonDecoder(SCHEMA).decode_values(pa.array([1]))


def test_parse_json_failfast_carries_the_record() -> None:
    batch = pa.record_batch({"value": ['{"a": 1}', '{"a": [1]}']})
    with pytest.raises(TransformError, match="at row 1 of the batch") as caught:
        ParseJson("value", SCHEMA, mode="FAILFAST").apply(batch)
    cause = caught.value.__cause__
    assert isinstance(cause, MalformedJsonError)
    assert (cause.record.row, cause.record.kind, cause.record.column) == (1, "bad_value", "a")


def test_parse_json_reason_is_never_cut_at_text_that_looks_like_its_own_message() -> None:
    """A reason that quotes text such as " (value: " is reported whole."""
    batch = pa.record_batch({"value": ['{"a": "of the batch:  (value: x"}']})
    with pytest.raises(TransformError) as caught:
        ParseJson("value", SCHEMA, mode="FAILFAST").apply(batch)
    assert 'cannot read "of the batch:  (value: x" as INT (value: ' in str(caught.value)
