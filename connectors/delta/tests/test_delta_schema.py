"""Arrow types as Delta holds them; partition values as Delta's writers and readers spell them."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
import time
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, Schema, write_deltalake

import microbatch as mb
from microbatch_delta._delta_schema import (
    delta_arrow_schema,
    parse_partition_value,
    partition_text_array,
    partition_value_text,
    table_arrow_schema,
)

UTC = dt.UTC


def test_types_map_to_what_delta_holds() -> None:
    schema = pa.schema(
        [
            ("ts_ns_paris", pa.timestamp("ns", "Europe/Paris")),
            ("ts_s_utc", pa.timestamp("s", "UTC")),
            ("ts_ns", pa.timestamp("ns")),
            ("ts_ms", pa.timestamp("ms")),
            ("ls", pa.large_string()),
            ("sv", pa.string_view()),
            ("lb", pa.large_binary()),
            ("bv", pa.binary_view()),
            ("fsb", pa.binary(4)),
            ("u8", pa.uint8()),
            ("u16", pa.uint16()),
            ("u32", pa.uint32()),
            ("u64", pa.uint64()),
            ("i8", pa.int8()),
            ("f16", pa.float16()),
            ("f32", pa.float32()),
            ("d64", pa.date64()),
            ("dict", pa.dictionary(pa.int8(), pa.large_string())),
            ("dec", pa.decimal128(10, 2)),
            ("dec256", pa.decimal256(38, 4)),
            ("ll", pa.large_list(pa.uint8())),
            ("fsl", pa.list_(pa.int32(), 3)),
            ("m", pa.map_(pa.large_string(), pa.timestamp("ns", "UTC"))),
            (
                "st",
                pa.struct(
                    [
                        ("a", pa.uint16()),
                        ("b", pa.large_list(pa.struct([("c", pa.timestamp("ns"))]))),
                    ]
                ),
            ),
            ("void", pa.null()),
            pa.field("required", pa.int64(), nullable=False),
        ],
        metadata={"pandas": "{}"},
    )
    mapped = delta_arrow_schema(schema)
    expected = {
        "ts_ns_paris": pa.timestamp("us", "UTC"),
        "ts_s_utc": pa.timestamp("us", "UTC"),
        "ts_ns": pa.timestamp("us"),
        "ts_ms": pa.timestamp("us"),
        "ls": pa.string(),
        "sv": pa.string(),
        "lb": pa.binary(),
        "bv": pa.binary(),
        "fsb": pa.binary(),
        "u8": pa.int16(),
        "u16": pa.int32(),
        "u32": pa.int64(),
        "u64": pa.int64(),
        "i8": pa.int8(),
        "f16": pa.float32(),
        "f32": pa.float32(),
        "d64": pa.date32(),
        "dict": pa.string(),
        "dec": pa.decimal128(10, 2),
        "dec256": pa.decimal128(38, 4),
        "ll": pa.list_(pa.field("element", pa.int16())),
        "fsl": pa.list_(pa.field("element", pa.int32())),
        "m": pa.map_(pa.string(), pa.timestamp("us", "UTC")),
        "st": pa.struct(
            [
                ("a", pa.int32()),
                ("b", pa.list_(pa.field("element", pa.struct([("c", pa.timestamp("us"))])))),
            ]
        ),
        "void": pa.null(),
        "required": pa.int64(),
    }
    assert {f.name: f.type for f in mapped} == expected
    assert mapped.names == schema.names
    assert not mapped.field("required").nullable
    assert mapped.metadata is None
    # What delta-rs makes of the mapped schema is the mapped schema itself: the table's Arrow
    # schema after a create equals what the parts were written with.
    assert pa.schema(Schema.from_arrow(mapped).to_arrow()).equals(mapped)


@pytest.mark.parametrize(
    ("type", "path", "words"),
    [
        (pa.time64("us"), "t", "time-of-day"),
        (pa.duration("us"), "t", "duration"),
        (pa.month_day_nano_interval(), "t", "duration"),
        (pa.decimal256(40, 2), "t", "38 digits"),
        (pa.struct([("inner", pa.list_(pa.time32("s")))]), "t.inner.element", "time-of-day"),
        (pa.map_(pa.string(), pa.struct([("x", pa.duration("s"))])), "t.value.x", "duration"),
        (pa.struct([]), "t", "at least one field"),
        (pa.dense_union([pa.field("a", pa.int8())]), "t", "no such type"),
    ],
)
def test_types_delta_cannot_hold_name_the_field(type: pa.DataType, path: str, words: str) -> None:
    with pytest.raises(mb.SchemaError) as caught:
        delta_arrow_schema(pa.schema([("ok", pa.int8()), ("t", type)]))
    assert f"'{path}'" in str(caught.value)
    assert words in str(caught.value)


@pytest.mark.parametrize(
    ("schema", "words"),
    [
        (pa.schema([("id", pa.int8()), ("ID", pa.int8())]), "Columns 'id' and 'ID' have"),
        (
            pa.schema([("s", pa.struct([("x", pa.int8()), ("X", pa.int8())]))]),
            "Columns 'x' and 'X' in 's' have",
        ),
        (
            pa.schema([("s", pa.list_(pa.struct([("Ab", pa.int8()), ("aB", pa.int8())])))]),
            "in 's.element' have",
        ),
    ],
)
def test_names_that_differ_only_in_case(schema: pa.Schema, words: str) -> None:
    with pytest.raises(mb.SchemaError, match=words):
        delta_arrow_schema(schema)


def test_table_arrow_schema_is_pyarrow(tmp_path: Path) -> None:
    data = pa.table({"a": pa.array([1], pa.int32()), "s": pa.array([{"x": "y"}])})
    write_deltalake(str(tmp_path), data)
    schema = table_arrow_schema(DeltaTable(str(tmp_path)))
    assert isinstance(schema, pa.Schema)
    assert schema == pa.schema([("a", pa.int32()), ("s", pa.struct([("x", pa.string())]))])


# --- partition values -----------------------------------------------------------------------

CASES: list[tuple[pa.DataType, object, str | None]] = [
    (pa.string(), "a b", "a b"),
    (pa.string(), "x/y=z%", "x/y=z%"),
    (pa.string(), "é\t", "é\t"),
    (pa.string(), "", None),
    (pa.string(), "__HIVE_DEFAULT_PARTITION__", None),
    (pa.string(), None, None),
    (pa.int8(), -128, "-128"),
    (pa.int64(), 2**63 - 1, "9223372036854775807"),
    (pa.bool_(), True, "true"),
    (pa.bool_(), False, "false"),
    (pa.date32(), dt.date(1, 1, 1), "0001-01-01"),
    (pa.date32(), dt.date(2024, 2, 29), "2024-02-29"),
    (
        pa.timestamp("us", "UTC"),
        dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC),
        "2024-01-02 03:04:05.000000",
    ),
    (
        pa.timestamp("us", "UTC"),
        dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        "1969-12-31 23:59:59.999999",
    ),
    (pa.timestamp("us"), dt.datetime(2024, 1, 2, 3, 4, 5, 120000), "2024-01-02 03:04:05.120000"),
    (pa.float64(), 1.5, "1.5"),
    (pa.float64(), 0.1, "0.1"),
    (pa.float64(), -0.0, "-0"),
    (pa.float64(), float("inf"), "Infinity"),
    (pa.float64(), float("-inf"), "-Infinity"),
    (pa.float32(), 0.1, "0.1"),
    (pa.decimal128(10, 2), decimal.Decimal("-0.01"), "-0.01"),
    (pa.decimal128(38, 0), decimal.Decimal("9" * 38), "9" * 38),
    (pa.binary(), b"\x00\xffa", "\\u0000\\u00FF\\u0061"),
]


@pytest.mark.parametrize(("type", "value", "text"), CASES)
def test_partition_value_text_and_back(type: pa.DataType, value: object, text: str | None) -> None:
    assert partition_value_text(value, type) == text
    back = parse_partition_value(text, type)
    assert back.type == type
    expected = None if text is None else pa.scalar(value, type).as_py()
    assert back.as_py() == expected


def test_partition_nan_round_trips() -> None:
    assert partition_value_text(float("nan"), pa.float64()) == "NaN"
    assert (
        parse_partition_value("NaN", pa.float64()).as_py()
        != parse_partition_value("NaN", pa.float64()).as_py()
    )


def test_time_zone_aware_partition_values_are_utc() -> None:
    paris = dt.timezone(dt.timedelta(hours=1))
    moment = dt.datetime(2024, 1, 2, 4, 4, 5, tzinfo=paris)
    assert (
        partition_value_text(moment, pa.timestamp("us", "Europe/Paris"))
        == "2024-01-02 03:04:05.000000"
    )


@pytest.mark.parametrize(
    "text",
    [
        "2024-01-02 03:04:05.123",
        "2024-01-02T03:04:05.123Z",
        "2024-01-02T03:04:05.123000Z",
        "2024-01-02T04:04:05.123+01:00",
        "2024-01-02 03:04:05.123000000",
    ],
)
def test_timestamp_partition_forms_the_protocol_allows(text: str) -> None:
    value = parse_partition_value(text, pa.timestamp("us", "UTC")).as_py()
    assert value == dt.datetime(2024, 1, 2, 3, 4, 5, 123000, tzinfo=UTC)


def test_parse_accepts_other_writers_spellings() -> None:
    assert parse_partition_value("__HIVE_DEFAULT_PARTITION__", pa.int32()).as_py() is None
    assert parse_partition_value("", pa.int32()).as_py() is None
    assert parse_partition_value("inf", pa.float64()).as_py() == float("inf")
    assert parse_partition_value("1e+20", pa.float64()).as_py() == 1e20
    assert parse_partition_value("TRUE", pa.bool_()).as_py() is True
    assert parse_partition_value("1.5", pa.decimal128(5, 2)).as_py() == decimal.Decimal("1.50")
    assert parse_partition_value("2024-01-02", pa.timestamp("us")).as_py() == dt.datetime(
        2024, 1, 2
    )
    assert parse_partition_value("plain", pa.binary()).as_py() == b"plain"


@pytest.mark.parametrize(
    ("text", "type"),
    [
        ("x", pa.int32()),
        ("yes", pa.bool_()),
        ("2024-13-01", pa.date32()),
        ("300", pa.int8()),
        ("noon", pa.timestamp("us")),
    ],
)
def test_parse_errors_name_the_text_and_type(text: str, type: pa.DataType) -> None:
    with pytest.raises(ValueError) as caught:
        parse_partition_value(text, type)
    assert repr(text) in str(caught.value)
    assert str(type) in str(caught.value)


def test_nested_types_cannot_be_partition_columns() -> None:
    with pytest.raises(mb.SchemaError, match="cannot be partitioned"):
        partition_value_text({"a": 1}, pa.struct([("a", pa.int8())]))


def test_array_and_scalar_forms_agree() -> None:
    values = pa.array([3, None, 3, -1, 0], pa.int16())
    assert partition_text_array(values, pa.int16()).to_pylist() == ["3", None, "3", "-1", "0"]


def _delta_rs_texts(folder: Path, column: pa.Array) -> set[str | None]:
    """The partition value texts delta-rs's own writer puts in its log for ``column``."""
    write_deltalake(
        str(folder), pa.table({"p": column, "row": list(range(len(column)))}), partition_by=["p"]
    )
    log = (folder / "_delta_log" / "00000000000000000000.json").read_text()
    adds = [json.loads(line)["add"] for line in log.splitlines() if '"add"' in line]
    return {add["partitionValues"]["p"] for add in adds}


@pytest.mark.parametrize(
    "column",
    [
        pa.array(["a b", "x/y", "k=v", "50%", None, "é#?&:*"]),
        pa.array([1, -2, 0, None], pa.int32()),
        pa.array([True, False, None]),
        pa.array([dt.date(2024, 1, 2), None, dt.date(1, 1, 1), dt.date(9999, 12, 31)]),
        pa.array(
            [
                dt.datetime(2024, 1, 2, 3, 4, 5),
                dt.datetime(2024, 1, 2, 3, 4, 5, 123456),
                None,
                dt.datetime(1969, 12, 31, 23, 59, 59, 999999),
            ],
            pa.timestamp("us", "UTC"),
        ),
        pa.array([dt.datetime(2024, 1, 2, 3, 4, 5, 1), None], pa.timestamp("us")),
        pa.array([decimal.Decimal("1.50"), None, decimal.Decimal("12.01")], pa.decimal128(10, 2)),
    ],
    ids=["string", "int", "bool", "date", "timestamp", "timestamp_ntz", "decimal"],
)
def test_texts_match_what_delta_rs_writes(tmp_path: Path, column: pa.Array) -> None:
    # The same values written by delta-rs's writer get the same text in its log as ours.
    ours = {partition_value_text(value, column.type) for value in column.to_pylist()}
    assert ours == _delta_rs_texts(tmp_path / "rs", column)
    # and what the reader makes of each text is the value itself
    for value in column.to_pylist():
        assert (
            parse_partition_value(partition_value_text(value, column.type), column.type).as_py()
            == value
        )


def test_partition_texts_ignore_the_local_time_zone() -> None:
    before = os.environ.get("TZ")
    os.environ["TZ"] = "America/New_York"
    time.tzset()
    try:
        value = dt.datetime(2024, 6, 1, 12, 0, tzinfo=UTC)
        assert (
            partition_value_text(value, pa.timestamp("us", "UTC")) == "2024-06-01 12:00:00.000000"
        )
        assert (
            parse_partition_value("2024-06-01 12:00:00", pa.timestamp("us", "UTC")).as_py() == value
        )
        naive = dt.datetime(2024, 6, 1, 12, 0)
        assert partition_value_text(naive, pa.timestamp("us")) == "2024-06-01 12:00:00.000000"
    finally:
        if before is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = before
        time.tzset()
