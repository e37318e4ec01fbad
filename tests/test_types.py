from __future__ import annotations

import pyarrow as pa
import pytest

from microbatch.errors import SchemaError
from microbatch.types import as_schema, parse_ddl, parse_type, schema_diff, to_ddl, type_to_ddl

SIMPLE = [
    ("BOOLEAN", pa.bool_()),
    ("TINYINT", pa.int8()),
    ("BYTE", pa.int8()),
    ("SMALLINT", pa.int16()),
    ("SHORT", pa.int16()),
    ("INT", pa.int32()),
    ("INTEGER", pa.int32()),
    ("BIGINT", pa.int64()),
    ("LONG", pa.int64()),
    ("FLOAT", pa.float32()),
    ("DOUBLE", pa.float64()),
    ("STRING", pa.string()),
    ("BINARY", pa.binary()),
    ("DATE", pa.date32()),
    ("TIMESTAMP", pa.timestamp("us", tz="UTC")),
    ("TIMESTAMP_NTZ", pa.timestamp("us")),
    ("DECIMAL", pa.decimal128(10, 0)),
    ("DECIMAL(5)", pa.decimal128(5, 0)),
    ("DECIMAL(10,2)", pa.decimal128(10, 2)),
    ("DECIMAL( 38 , 38 )", pa.decimal128(38, 38)),
]


@pytest.mark.parametrize(("ddl", "expected"), SIMPLE)
def test_each_simple_type(ddl: str, expected: pa.DataType) -> None:
    schema = parse_ddl(f"c {ddl}")
    assert schema == pa.schema([pa.field("c", expected)])
    assert schema.field("c").nullable


@pytest.mark.parametrize(("ddl", "expected"), SIMPLE)
def test_type_names_are_case_insensitive(ddl: str, expected: pa.DataType) -> None:
    assert parse_ddl(f"c {ddl.lower()}").field("c").type == expected
    assert parse_type(ddl.title()) == expected


NESTED = [
    ("ARRAY<STRING>", pa.list_(pa.string())),
    ("MAP<STRING, INT>", pa.map_(pa.string(), pa.int32())),
    ("STRUCT<a: INT, b: STRING>", pa.struct([("a", pa.int32()), ("b", pa.string())])),
    ("STRUCT<a INT, b STRING>", pa.struct([("a", pa.int32()), ("b", pa.string())])),
    ("struct<>", pa.struct([])),
    ("ARRAY<ARRAY<BIGINT>>", pa.list_(pa.list_(pa.int64()))),
    (
        "ARRAY<MAP<STRING, ARRAY<STRUCT<x: DECIMAL(5,2), y: MAP<STRING, DATE>>>>>",
        pa.list_(
            pa.map_(
                pa.string(),
                pa.list_(
                    pa.struct(
                        [("x", pa.decimal128(5, 2)), ("y", pa.map_(pa.string(), pa.date32()))]
                    )
                ),
            )
        ),
    ),
    (
        "STRUCT<inner: STRUCT<deeper: STRUCT<ts: TIMESTAMP>>>",
        pa.struct(
            [("inner", pa.struct([("deeper", pa.struct([("ts", pa.timestamp("us", "UTC"))]))]))]
        ),
    ),
]


@pytest.mark.parametrize(("ddl", "expected"), NESTED)
def test_nested_types(ddl: str, expected: pa.DataType) -> None:
    assert parse_ddl(f"n {ddl}").field("n").type == expected


def test_struct_fields_take_not_null_and_comment() -> None:
    dtype = parse_type("STRUCT<a: INT NOT NULL COMMENT 'first', b STRING>")
    assert dtype.field("a").nullable is False
    assert dtype.field("a").metadata == {b"comment": b"first"}
    assert dtype.field("b").nullable is True


def test_the_full_example_from_the_docs() -> None:
    schema = parse_ddl(
        "id BIGINT, name STRING, ts TIMESTAMP, tags ARRAY<STRING>, m MAP<STRING, INT>, "
        "s STRUCT<a: INT, b: STRING>, price DECIMAL(10,2), d DATE, b BINARY, ok BOOLEAN, "
        "f FLOAT, x DOUBLE, t TINYINT, sm SMALLINT, i INT, i2 INTEGER, l LONG, ntz TIMESTAMP_NTZ"
    )
    assert schema.names == [
        *("id", "name", "ts", "tags", "m", "s", "price", "d", "b", "ok"),
        *("f", "x", "t", "sm", "i", "i2", "l", "ntz"),
    ]
    assert schema.field("ts").type == pa.timestamp("us", tz="UTC")
    assert schema.field("m").type == pa.map_(pa.string(), pa.int32())
    assert schema.field("price").type == pa.decimal128(10, 2)
    assert schema.field("ntz").type == pa.timestamp("us")


def test_not_null_and_comment() -> None:
    schema = parse_ddl(
        'id BIGINT NOT NULL, note STRING COMMENT \'plain\' , v INT NOT NULL COMMENT "say \\"hi\\""'
    )
    assert schema.field("id").nullable is False
    assert schema.field("id").metadata is None
    assert schema.field("note").nullable is True
    assert schema.field("note").metadata == {b"comment": b"plain"}
    assert schema.field("v").nullable is False
    assert schema.field("v").metadata == {b"comment": b'say "hi"'}


def test_comment_with_escaped_quote() -> None:
    field = parse_ddl(r"c STRING COMMENT 'it\'s a \\ test'").field("c")
    assert field.metadata == {b"comment": b"it's a \\ test"}


def test_backquoted_names() -> None:
    schema = parse_ddl("`my col` STRING, `a``b` INT, `select` DATE, s STRUCT<`x y`: INT>")
    assert schema.names == ["my col", "a`b", "select", "s"]
    assert schema.field("s").type == pa.struct([("x y", pa.int32())])


def test_whitespace_is_free() -> None:
    assert parse_ddl("  a   ARRAY <  INT >  ,b\tMAP<STRING,INT>  ") == parse_ddl(
        "a ARRAY<INT>, b MAP<STRING, INT>"
    )


def test_column_names_that_look_like_keywords() -> None:
    schema = parse_ddl("comment STRING, not INT, null BOOLEAN")
    assert schema.names == ["comment", "not", "null"]


ERRORS = [
    ("id BIGNIT", ["unknown type 'BIGNIT'", "position 3", "known types:", "BIGINT"]),
    ("", ["the schema is empty", "id BIGINT"]),
    ("   ", ["the schema is empty"]),
    ("a INT, a STRING", ["duplicate column name 'a'", "position 7", "first defined at position 0"]),
    ("s STRUCT<b INT, b INT>", ["duplicate column name 'b'", "position 16"]),
    ("a ARRAY<INT", ["expected '>'", "end of input", "position 11", "ARRAY< opened at position 2"]),
    ("a INT b", ["unexpected 'b'", "position 6", "separate columns with ','"]),
    ("`x INT", ["unterminated backquoted name", "position 0"]),
    ("a STRING COMMENT 'x", ["unterminated string", "position 17"]),
    ("a DECIMAL(40,2)", ["invalid DECIMAL(40,2)", "position 10", "precision must be 1..38"]),
    ("a DECIMAL(5,6)", ["invalid DECIMAL(5,6)"]),
    ("a DECIMAL(x)", ["expected a number", "'x'", "position 10"]),
    ("a MAP<INT>", ["expected ','", "found '>'", "position 9"]),
    ("a INT NOT", ["expected 'NULL'", "position 9"]),
    ("a INT COMMENT x", ["expected a quoted comment", "'x'", "position 14"]),
    (", a INT", ["expected a column name", "position 0"]),
    ("a INT,", ["expected a column name", "end of input", "position 6"]),
    ("a ?", ["unexpected character '?'", "position 2"]),
    ("a", ["expected a type", "end of input", "position 1"]),
    ("a ARRAY<>", ["expected a type", "found '>'", "position 8"]),
    ("a STRUCT<x: FOO>", ["unknown type 'FOO'", "position 12"]),
]


@pytest.mark.parametrize(("ddl", "fragments"), ERRORS)
def test_errors_say_what_and_where(ddl: str, fragments: list[str]) -> None:
    with pytest.raises(SchemaError) as info:
        parse_ddl(ddl)
    message = str(info.value)
    assert message.startswith(f'Cannot parse schema "{ddl}": ')
    for fragment in fragments:
        assert fragment in message


def test_the_documented_error_message() -> None:
    with pytest.raises(SchemaError, match=r"^Cannot parse schema \"id BIGNIT\": unknown type "):
        parse_ddl("id BIGNIT")


def test_parse_type() -> None:
    assert parse_type("array<decimal(10,2)>") == pa.list_(pa.decimal128(10, 2))
    with pytest.raises(SchemaError, match=r"Cannot parse type \"INT, STRING\": unexpected ','"):
        parse_type("INT, STRING")
    with pytest.raises(SchemaError, match="unknown type 'VARCHAR'"):
        parse_type("VARCHAR")


ROUND_TRIP = (
    "id BIGINT NOT NULL, name STRING COMMENT 'it\\'s', ts TIMESTAMP, ntz TIMESTAMP_NTZ, "
    "tags ARRAY<STRING>, m MAP<STRING, ARRAY<INT>>, s STRUCT<a: INT NOT NULL, `b c`: STRING>, "
    "price DECIMAL(10,2), d DATE, `my col` BINARY, ok BOOLEAN, f FLOAT, x DOUBLE, t TINYINT, "
    "sm SMALLINT, e STRUCT<>"
)


def test_to_ddl_writes_canonical_text() -> None:
    assert to_ddl(parse_ddl(ROUND_TRIP)) == ROUND_TRIP
    assert to_ddl(parse_ddl("a integer, b long, c decimal")) == "a INT, b BIGINT, c DECIMAL(10,0)"


def test_to_ddl_round_trips_including_metadata() -> None:
    schema = parse_ddl(ROUND_TRIP)
    assert parse_ddl(to_ddl(schema)).equals(schema, check_metadata=True)


def test_to_ddl_quotes_names_that_need_it() -> None:
    schema = pa.schema([("a b", pa.int32()), ("x`y", pa.string()), ("1st", pa.bool_())])
    assert to_ddl(schema) == "`a b` INT, `x``y` STRING, `1st` BOOLEAN"
    assert parse_ddl(to_ddl(schema)) == schema


@pytest.mark.parametrize(
    ("dtype", "where"),
    [
        (pa.uint8(), "Column 'a' has type uint8"),
        (pa.timestamp("ns"), "Column 'a' has type timestamp[ns]"),
        (pa.list_(pa.large_string()), "Column 'a[]' has type large_string"),
        (pa.struct([("x", pa.float16())]), "Column 'a.x' has type halffloat"),
    ],
)
def test_to_ddl_rejects_types_without_ddl(dtype: pa.DataType, where: str) -> None:
    with pytest.raises(SchemaError, match="no DDL spelling") as info:
        to_ddl(pa.schema([("a", dtype)]))
    assert where in str(info.value)
    assert "cast it" in str(info.value)


def test_type_to_ddl() -> None:
    assert type_to_ddl(pa.map_(pa.string(), pa.list_(pa.int64()))) == "MAP<STRING, ARRAY<BIGINT>>"
    with pytest.raises(SchemaError, match=r"^Type uint16, which has no DDL spelling"):
        type_to_ddl(pa.uint16())


def test_as_schema() -> None:
    schema = pa.schema([("a", pa.int32())])
    assert as_schema(schema) is schema
    assert as_schema("a INT") == schema


@pytest.mark.parametrize("value", [42, None, {"a": "INT"}, pa.int32()])
def test_as_schema_rejects_other_values(value: object) -> None:
    with pytest.raises(SchemaError, match=r"Expected a pyarrow.Schema or a DDL string"):
        as_schema(value)


def test_schema_diff_of_equal_schemas_is_empty() -> None:
    schema = parse_ddl(ROUND_TRIP)
    assert schema_diff(schema, parse_ddl(ROUND_TRIP)) == []
    assert schema_diff(schema, schema.remove_metadata()) == []
    without_comments = pa.schema([f.remove_metadata() for f in schema])
    assert schema_diff(schema, without_comments) == []


def test_schema_diff_lists_every_difference() -> None:
    expected = parse_ddl("a INT, b STRING, c DATE NOT NULL, d ARRAY<INT>")
    actual = parse_ddl("b BIGINT, a INT, c DATE, d ARRAY<STRING>, e TIMESTAMP, f BOOLEAN")
    assert schema_diff(expected, actual) == [
        "column 'b': type differs: expected STRING, got BIGINT",
        "column 'c': expected NOT NULL, got nullable",
        "column 'd': type differs: expected ARRAY<INT>, got ARRAY<STRING>",
        "extra column 'e' (TIMESTAMP)",
        "extra column 'f' (BOOLEAN)",
    ]
    assert schema_diff(parse_ddl("a INT, z STRING"), parse_ddl("a INT")) == [
        "missing column 'z' (STRING)"
    ]


def test_schema_diff_reports_order_and_duplicates() -> None:
    assert schema_diff(parse_ddl("a INT, b INT"), parse_ddl("b INT, a INT")) == [
        "column order differs: expected a, b; got b, a"
    ]
    doubled = pa.schema([("a", pa.int32()), ("a", pa.int32())])
    assert schema_diff(parse_ddl("a INT"), doubled) == [
        "duplicate column 'a' in actual schema (2 times)"
    ]


def test_schema_diff_falls_back_to_arrow_names() -> None:
    expected = pa.schema([("a", pa.list_(pa.field("item", pa.int32(), nullable=False)))])
    actual = pa.schema([("a", pa.list_(pa.int32())), ("u", pa.uint32())])
    assert schema_diff(expected, actual) == [
        "column 'a': type differs: expected list<item: int32 not null>, got list<item: int32>",
        "extra column 'u' (uint32)",
    ]
