"""Tests of microbatch.spark_json: one JSON record read as Spark 4's JSON reader reads it.

The expected rows come from PySpark 4.3.0 (local[1], spark.sql.session.timeZone=UTC), which read
each record as a one-line file with ``spark.read.schema(ddl + ", _corrupt_record STRING")
.options(...).json(path)`` (``multiLine`` for the MULTILINE cases): a malformed record is one
whose corrupt-record column is set, and its expected rows are the values Spark kept for it.
Cases that Spark did not check say so.
"""

from __future__ import annotations

import dataclasses
import math
from datetime import UTC, date, datetime
from decimal import Decimal
from functools import lru_cache
from typing import Any, NamedTuple

import pyarrow as pa
import pytest

from microbatch.errors import SchemaError
from microbatch.json_decoder import MalformedKind
from microbatch.spark_json import SparkJsonOptions, SparkJsonReader
from microbatch.types import parse_ddl

D = Decimal
NAN, INF = math.nan, math.inf
# the kinds of problem (MalformedKind values)
VALUE, RANGE, JSON = "bad_value", "out_of_range", "invalid_json"
UTF8, OBJECT = "invalid_utf8", "not_an_object"

PLAIN = "a INT, b STRING"
TRIO = "a INT, b STRING, d DOUBLE"
BYTES = "a INT, bin BINARY, b STRING"
MIXED = "a INT, b STRING, bin BINARY, d DOUBLE, x DECIMAL(5,2)"
NUMBERS = "i8 TINYINT, i16 SMALLINT, i64 BIGINT, f FLOAT, d DOUBLE"
ZEROS = "i INT, d DOUBLE, f FLOAT"
SINGLE = "f FLOAT"
AMOUNTS = "x DECIMAL(5,2), y DECIMAL(38,0)"
WIDE = "y DECIMAL(38,0), d DOUBLE"
SCALARS = "t BOOLEAN, bin BINARY, s STRING"
BASE64 = "bin BINARY, a INT"
TIMES = "dt DATE, ts TIMESTAMP, ntz TIMESTAMP_NTZ"
NESTED = "st STRUCT<x: INT, y: STRING>, arr ARRAY<INT>, m MAP<STRING, INT>, z INT"
FULL = (
    "st STRUCT<x: INT, y: STRING>, arr ARRAY<INT>, z INT, as ARRAY<STRUCT<x: INT>>, "
    "m MAP<STRING, INT>"
)
ROWS = "as ARRAY<STRUCT<x: INT>>, z INT"
MAPS = "m MAP<STRING, STRUCT<x: INT>>, aa ARRAY<ARRAY<INT>>, z INT"
LISTS = (
    "m MAP<STRING, ARRAY<INT>>, aas ARRAY<ARRAY<STRUCT<x: INT>>>, arr ARRAY<INT>, z INT, "
    "ms MAP<STRING, STRING>"
)
STRUCTS = "s STRUCT<a: STRUCT<b: STRUCT<c: INT>>>, z INT"
DEEP = "b STRING, q INT"

DEFAULT = SparkJsonOptions()
COMMENTS = SparkJsonOptions(allow_comments=True)
UNQUOTED = SparkJsonOptions(allow_unquoted_field_names=True)
NO_SINGLE = SparkJsonOptions(allow_single_quotes=False)
ZEROS_OK = SparkJsonOptions(allow_numeric_leading_zeros=True)
ANY_ESCAPE = SparkJsonOptions(allow_backslash_escaping_any_character=True)
CONTROL = SparkJsonOptions(allow_unquoted_control_chars=True)
NO_NAN = SparkJsonOptions(allow_non_numeric_numbers=False)
AS_STRING = SparkJsonOptions(primitives_as_string=True)
DECIMAL_PREF = SparkJsonOptions(prefers_decimal=True)


class Bad(NamedTuple):
    """A malformed record: the rows PERMISSIVE mode gives for it, and the kind of problem."""

    rows: tuple[dict[str, Any], ...]
    kind: str


def bad(kind: str, *rows: dict[str, Any]) -> Bad:
    """Malformed; Spark keeps ``rows`` (their other columns null), one row of nulls if none."""
    return Bad(rows or ({},), kind)


def case(
    name: str,
    ddl: str,
    record: bytes,
    expected: list[dict[str, Any]] | Bad,
    options: SparkJsonOptions = DEFAULT,
) -> Any:
    """A record, and the rows Spark reads from it (only the non-null columns) or ``bad(...)``."""
    return pytest.param(ddl, options, record, expected, id=name)


def iso(dtype: pa.DataType, text: str) -> Any:
    """A stand-in for the datetime parser that the file source passes: ISO-8601 text only."""
    try:
        if pa.types.is_date(dtype):
            return date.fromisoformat(text)
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    if dtype.tz is None:
        return None if moment.tzinfo else moment
    return moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC)


@lru_cache
def reader(ddl: str, options: SparkJsonOptions) -> SparkJsonReader:
    return SparkJsonReader(parse_ddl(ddl), options, iso)


def plain(value: Any) -> Any:
    """``value`` with floats as their repr, so that NaN equals NaN and -0.0 differs from 0.0."""
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def check(ddl: str, options: SparkJsonOptions, record: bytes, expected: list[Any] | Bad) -> None:
    names = parse_ddl(ddl).names
    result = reader(ddl, options).read(record)
    if isinstance(expected, Bad):
        assert result.malformed is not None, f"read {result.rows}"
        assert (result.rows, result.kind) == ([], expected.kind), result.malformed
        got = result.partial
    else:
        assert result.malformed is None, result.malformed
        got = result.rows
    rows = expected.rows if isinstance(expected, Bad) else expected
    assert plain(got) == plain([{n: row.get(n) for n in names} for row in rows])


GRAMMAR = [
    # a blank line is no record (Spark skips it: checked with blank lines in a file)
    case("empty_record", PLAIN, b"", []),
    case("blank_record", PLAIN, b" \t ", []),
    # CR is whitespace (checked in a multiLine document with CRLF line ends)
    case("cr_at_the_end", PLAIN, b'{"a":1}\r', [{"a": 1}]),
    case("base", PLAIN, b'{"a":1,"b":"x"}', [{"a": 1, "b": "x"}]),
    case("text_after_the_document", PLAIN, b'{"a":1} xyz', [{"a": 1}]),
    case("second_document", PLAIN, b'{"a":1}{"a":2}', [{"a": 1}]),
    case("repeated_key_last_wins", PLAIN, b'{"a":1,"a":2}', [{"a": 2}]),
    case("repeated_key_null_last", PLAIN, b'{"a":1,"a":null}', [{}]),
    case("repeated_key_bad_last", BYTES, b'{"a":1,"a":"x"}', bad(VALUE, {"a": 1})),
    case("repeated_key_bad_first", BYTES, b'{"a":"x","a":2}', bad(VALUE, {"a": 2})),
    case("names_are_case_sensitive", PLAIN, b'{"A":1,"B":"x"}', [{}]),
    case("escaped_name", FULL, b'{"\\u007a":3}', [{"z": 3}]),
    case("single_quoted_name", FULL, b"{'z\\'':1,'z':4}", [{"z": 4}]),
    case("surrogate_pair_in_name", BYTES, b'{"\\ud83d\\ude00":1,"a":2}', [{"a": 2}]),
    case("lone_surrogate_in_name", MIXED, b'{"\\ud800":1,"a":2}', bad(JSON)),
    case("control_char_in_name", PLAIN, b'{"a":1,"b\x01":2}', bad(JSON)),
    case("array_of_rows", PLAIN, b'[{"a":1},{"a":2}]', [{"a": 1}, {"a": 2}]),
    case("empty_array", PLAIN, b"[]", []),
    case(
        "array_with_bad_row",
        PLAIN,
        b'[{"a":1}, {"a":"x","b":"y"}, {"a":3}]',
        bad(VALUE, {"a": 1}, {"b": "y"}, {"a": 3}),
    ),
    case("array_with_number", PLAIN, b'[{"a":1}, 2]', bad(OBJECT)),
    case("array_with_null", PLAIN, b'[{"a":1}, null]', bad(OBJECT)),
    case("number", PLAIN, b"1", bad(OBJECT)),
    case("string", PLAIN, b'"x"', bad(OBJECT)),
    case("null", PLAIN, b"null", bad(OBJECT)),
    case("mismatched_bracket", LISTS, b'{"z":1]', bad(JSON)),
    case("trailing_comma", PLAIN, b'{"a":1,}', bad(JSON)),
    case("truncated", PLAIN, b'{"a":1', bad(JSON)),
    case("leading_zero", PLAIN, b'{"a":01}', bad(JSON)),
    case("plus_sign", PLAIN, b'{"a":+1}', bad(JSON)),
    case("leading_dot", PLAIN, b'{"b":.5}', bad(JSON)),
    case("letter_after_number", BYTES, b'{"a":1x,"b":"k"}', bad(JSON)),
    case("single_quotes", PLAIN, b"{'a':1,'b':'x'}", [{"a": 1, "b": "x"}]),
    case("single_quoted_string_with_quote", PLAIN, b'{"a":1,"b":\'x"y\'}', [{"a": 1, "b": 'x"y'}]),
    case("escaped_single_quote", PLAIN, b'{"a":1,"b":"it\\\'s"}', [{"a": 1, "b": "it's"}]),
    case("bad_escape", PLAIN, b'{"a":1,"b":"\\q"}', bad(JSON)),
    case("raw_tab_in_string", PLAIN, b'{"a":1,"b":"x\ty"}', bad(JSON)),
    case("unquoted_name", PLAIN, b"{a:1}", bad(JSON)),
    case("comment", PLAIN, b'{"a":1 /* c */}', bad(JSON)),
    case("comment_after_the_document", PLAIN, b'{"a":1} // c', [{"a": 1}]),
    case("comment_only", PLAIN, b"// c", bad(JSON)),
    case("hash_comment", PLAIN, b"# c", bad(JSON)),
    case("whitespace", PLAIN, b'  \t{"a":1}  ', [{"a": 1}]),
    case("byte_order_mark", PLAIN, b'\xef\xbb\xbf{"a":1}', [{"a": 1}]),
    case("byte_order_mark_only", BYTES, b"\xef\xbb\xbf", []),
    case("byte_order_mark_inside", PLAIN, b'{"a":1,\xef\xbb\xbf"b":"x"}', bad(JSON)),
    case("form_feed", PLAIN, b'{"a":1,\x0c"b":"x"}', bad(JSON)),
    case("null_values", PLAIN, b'{"a" : null , "b" : null}', [{}]),
    case("empty_object", FULL, b"{}", [{}]),
]

STRINGS = [
    case("number_text", PLAIN, b'{"a":1,"b":1.00}', [{"a": 1, "b": "1.00"}]),
    case("true_text", PLAIN, b'{"a":1,"b":true}', [{"a": 1, "b": "true"}]),
    case("nan_text", PLAIN, b'{"a":1,"b":NaN}', [{"a": 1, "b": "NaN"}]),
    case(
        "object_text",
        PLAIN,
        b'{"a":1,"b": {"x": 1,  "y" : [1, 2.50]} }',
        [{"a": 1, "b": '{"x": 1,  "y" : [1, 2.50]}'}],
    ),
    case("array_text", MIXED, b'{"b":  [1,2]  }', [{"b": "[1,2]"}]),
    case(
        "array_text_quotes",
        PLAIN,
        b'{"a":1,"b":[1, \'x\' ,"y"]}',
        [{"a": 1, "b": "[1, 'x' ,\"y\"]"}],
    ),
    case(
        "object_text_escapes",
        PLAIN,
        b'{"a":1,"b":{"k":"\\u00e9\\n"}}',
        [{"a": 1, "b": '{"k":"\\u00e9\\n"}'}],
    ),
    case("field_text", NESTED, b'{"st":{"x":1,"y":2.50}}', [{"st": {"x": 1, "y": "2.50"}}]),
    case(
        "map_value_text",
        LISTS,
        b'{"ms":{"k":{"a": 1},"j":2.50,"i":"s"},"z":1}',
        [{"z": 1, "ms": [("k", '{"a": 1}'), ("j", "2.50"), ("i", "s")]}],
    ),
    case("empty_string", SCALARS, b'{"s":""}', [{"s": ""}]),
    case("null_string", SCALARS, b'{"s":null}', [{}]),
    case(
        "escapes",
        SCALARS,
        b'{"s":"a\\u00e9\\n\\/\\"\\\\\\b\\f\\r\\t"}',
        [{"s": 'aé\n/"\\\x08\x0c\r\t'}],
    ),
    case("utf8", PLAIN, b'{"a":1,"b":"\xc3\xa9"}', [{"a": 1, "b": "é"}]),
    case("escaped_nul", PLAIN, b'{"a":1,"b":"x\\u0000y"}', [{"a": 1, "b": "x\x00y"}]),
    case("surrogate_pair", PLAIN, b'{"a":1,"b":"\\ud83d\\ude00"}', [{"a": 1, "b": "😀"}]),
    case("lone_surrogate", PLAIN, b'{"a":1,"b":"\\ud800"}', [{"a": 1, "b": "?"}]),
    case("high_surrogate_then_letter", MIXED, b'{"b":"\\ud83dx"}', [{"b": "?x"}]),
    case("short_hex_escape", MIXED, b'{"b":"\\u12"}', bad(JSON)),
    case(
        "single_quoted_escapes", PLAIN, b"{'b':'it\\'s \"q\"','a':1}", [{"a": 1, "b": 'it\'s "q"'}]
    ),
    case("single_quoted_tab", PLAIN, b"{'b':'x\ty','a':1}", bad(JSON)),
    case("text_with_bad_bracket", BYTES, b'{"a":1,"b":[1,2},"a":5}', bad(JSON)),
]

INTEGERS = [
    case("tinyint_127", NUMBERS, b'{"i8":127}', [{"i8": 127}]),
    case("tinyint_200_wraps", NUMBERS, b'{"i8":200}', [{"i8": -56}]),
    case("tinyint_255_wraps", NUMBERS, b'{"i8":255}', [{"i8": -1}]),
    case("tinyint_256", NUMBERS, b'{"i8":256}', bad(RANGE)),
    case("tinyint_minus_128", NUMBERS, b'{"i8":-128}', [{"i8": -128}]),
    case("tinyint_minus_129", NUMBERS, b'{"i8":-129}', bad(RANGE)),
    case("smallint_over", NUMBERS, b'{"i16":32768}', bad(RANGE)),
    case("smallint_under", NUMBERS, b'{"i16":-32769}', bad(RANGE)),
    case("bigint_max", NUMBERS, b'{"i64":9223372036854775807}', [{"i64": 9223372036854775807}]),
    case("bigint_over", NUMBERS, b'{"i64":9223372036854775808}', bad(RANGE)),
    case("bigint_exponent", NUMBERS, b'{"i64":1e2}', bad(VALUE)),
    case("bigint_nan", NUMBERS, b'{"i64":NaN}', bad(VALUE)),
    case("int_minus_zero_fraction", ZEROS, b'{"i":-0.0}', bad(VALUE)),
    case("int_fraction", PLAIN, b'{"a":1.0,"b":"k"}', bad(VALUE, {"b": "k"})),
    case("int_string", PLAIN, b'{"a":"1","b":"k"}', bad(VALUE, {"b": "k"})),
    case("int_empty_string", PLAIN, b'{"a":"","b":"k"}', bad(VALUE, {"b": "k"})),
    case("int_over", PLAIN, b'{"a":2147483648,"b":"k"}', bad(RANGE, {"b": "k"})),
    case("int_true", PLAIN, b'{"a":true,"b":"k"}', bad(VALUE, {"b": "k"})),
    case("int_object", PLAIN, b'{"a":{"x":1},"b":"y"}', bad(VALUE, {"b": "y"})),
    case("bad_value_after_good", PLAIN, b'{"b":"y","a":"x"}', bad(VALUE, {"b": "y"})),
    case("bad_value_before_good", PLAIN, b'{"a":"x","b":"y"}', bad(VALUE, {"b": "y"})),
]

FLOATS = [
    case("double_integer", NUMBERS, b'{"d":1}', [{"d": 1.0}]),
    case("double", NUMBERS, b'{"d":1.5}', [{"d": 1.5}]),
    case("double_exponent", NUMBERS, b'{"d":1E+2}', [{"d": 100.0}]),
    case("double_rounds_integer", MIXED, b'{"d":9007199254740993}', [{"d": 9007199254740992.0}]),
    case("double_rounds_text", MIXED, b'{"d":0.1000000000000000055511151231257827}', [{"d": 0.1}]),
    case("double_minus_zero", NUMBERS, b'{"d":-0.0}', [{"d": -0.0}]),
    case("double_integer_minus_zero", MIXED, b'{"d":-0}', [{"d": 0.0}]),
    case("double_over", NUMBERS, b'{"d":1e400}', [{"d": INF}]),
    case("double_under", NUMBERS, b'{"d":-1e400}', [{"d": -INF}]),
    case("double_too_small", NUMBERS, b'{"d":1e-400}', [{"d": 0.0}]),
    case("nan", NUMBERS, b'{"d":NaN}', [{"d": NAN}]),
    case("infinity", NUMBERS, b'{"d":Infinity}', [{"d": INF}]),
    case("plus_infinity", NUMBERS, b'{"d":+Infinity}', [{"d": INF}]),
    case("minus_infinity", NUMBERS, b'{"d":-Infinity}', [{"d": -INF}]),
    case("plus_inf", NUMBERS, b'{"d":+INF}', [{"d": INF}]),
    case("minus_inf", NUMBERS, b'{"d":-INF}', [{"d": -INF}]),
    case("inf", NUMBERS, b'{"d":INF}', bad(JSON)),
    case("minus_nan", NUMBERS, b'{"d":-NaN}', bad(JSON)),
    case("minus_inf_word", NUMBERS, b'{"d":-INFinity}', bad(JSON)),
    case("nan_string", NUMBERS, b'{"d":"NaN"}', [{"d": NAN}]),
    case("infinity_string", NUMBERS, b'{"d":"Infinity"}', [{"d": INF}]),
    case("plus_infinity_string", NUMBERS, b'{"d":"+Infinity"}', [{"d": INF}]),
    case("minus_infinity_string", NUMBERS, b'{"d":"-Infinity"}', [{"d": -INF}]),
    case("plus_inf_string", NUMBERS, b'{"d":"+INF"}', [{"d": INF}]),
    case("minus_inf_string", NUMBERS, b'{"d":"-INF"}', [{"d": -INF}]),
    case("inf_string", NUMBERS, b'{"d":"INF"}', bad(VALUE)),
    case("minus_nan_string", NUMBERS, b'{"d":"-NaN"}', bad(VALUE)),
    case("number_string", NUMBERS, b'{"d":"1.5"}', bad(VALUE)),
    case("empty_string", NUMBERS, b'{"d":""}', bad(VALUE)),
    case("double_true", NUMBERS, b'{"d":true}', bad(VALUE)),
    case("trailing_dot", NUMBERS, b'{"d":1.}', bad(JSON)),
    case("empty_exponent", NUMBERS, b'{"d":1e}', bad(JSON)),
    case("minus_alone", NUMBERS, b'{"d":-}', bad(JSON)),
    case("hex", NUMBERS, b'{"d":0x10}', bad(JSON)),
    case("double_zero_zero", NUMBERS, b'{"d":00}', bad(JSON)),
    case("float", NUMBERS, b'{"f":0.1}', [{"f": 0.10000000149011612}]),
    case("float_rounds_integer", NUMBERS, b'{"f":16777217}', [{"f": 16777216.0}]),
    case(
        "float_rounds_once",
        SINGLE,
        b'{"f":1.00000005960464477539062500001}',
        [{"f": 1.0000001192092896}],
    ),
    case("float_rounds_tie", SINGLE, b'{"f":1.000000059604644775390625}', [{"f": 1.0}]),
    case("float_over", NUMBERS, b'{"f":1e39}', [{"f": INF}]),
    case("float_max", NUMBERS, b'{"f":3.4028235e38}', [{"f": 3.4028234663852886e38}]),
    case("float_subnormal", SINGLE, b'{"f":1e-45}', [{"f": 1.401298464324817e-45}]),
    case("float_too_small", SINGLE, b'{"f":1e-46}', [{"f": 0.0}]),
    case("float_nan_string", NUMBERS, b'{"f":"NaN"}', [{"f": NAN}]),
    case("nan_off", NUMBERS, b'{"d":NaN}', bad(JSON), NO_NAN),
    case("minus_infinity_off", WIDE, b'{"d":-Infinity}', bad(JSON), NO_NAN),
    case("nan_string_off", NUMBERS, b'{"d":"NaN"}', bad(VALUE), NO_NAN),
    case("infinity_string_off", NUMBERS, b'{"d":"Infinity"}', bad(VALUE), NO_NAN),
]

DECIMALS = [
    case("half_up", AMOUNTS, b'{"x":1.005}', [{"x": D("1.01")}]),
    case("half_up_negative", AMOUNTS, b'{"x":-1.005}', [{"x": D("-1.01")}]),
    case("half_down", AMOUNTS, b'{"x":1.004}', [{"x": D("1.00")}]),
    case("round_to_scale", AMOUNTS, b'{"x":123.456}', [{"x": D("123.46")}]),
    case("exponent", AMOUNTS, b'{"x":1e2}', [{"x": D("100.00")}]),
    case("rounds_to_zero", AMOUNTS, b'{"x":1E-3}', [{"x": D("0.00")}]),
    case("no_negative_zero", MIXED, b'{"x":-0.001}', [{"x": D("0.00")}]),
    case("half_up_scale_0", AMOUNTS, b'{"y":2.5}', [{"y": D("3")}]),
    case("rounds_over", AMOUNTS, b'{"x":999.995}', bad(RANGE)),
    case("over_precision", AMOUNTS, b'{"x":1000}', bad(RANGE)),
    case("huge_exponent", MIXED, b'{"x":1e999999999}', bad(RANGE)),
    case("nan", AMOUNTS, b'{"x":NaN}', bad(VALUE)),
    case("string", AMOUNTS, b'{"x":"1.5"}', [{"x": D("1.50")}]),
    case("negative_string", MIXED, b'{"x":"-1.005"}', [{"x": D("-1.01")}]),
    case("exponent_string", AMOUNTS, b'{"x":"1e2"}', [{"x": D("100.00")}]),
    case("plus_string", AMOUNTS, b'{"x":"+1.5"}', [{"x": D("1.50")}]),
    case("commas_dropped", AMOUNTS, b'{"x":"1,2.5"}', [{"x": D("12.50")}]),
    case("only_commas_and_a_digit", AMOUNTS, b'{"x":",1,,"}', [{"x": D("1.00")}]),
    case("leading_dot_string", MIXED, b'{"x":".5"}', [{"x": D("0.50")}]),
    case("trailing_dot_string", MIXED, b'{"x":"5."}', [{"x": D("5.00")}]),
    case("fullwidth_digit", MIXED, b'{"x":"\xef\xbc\x91"}', [{"x": D("1.00")}]),
    case("letters", AMOUNTS, b'{"x":"abc"}', bad(VALUE)),
    case("empty_string", AMOUNTS, b'{"x":""}', bad(VALUE)),
    case("space", AMOUNTS, b'{"x":" 1.5"}', bad(VALUE)),
    case("underscore", MIXED, b'{"x":"1_0"}', bad(VALUE)),
]

BOOLEANS_AND_BINARY = [
    case("true", SCALARS, b'{"t":true}', [{"t": True}]),
    case("true_string", SCALARS, b'{"t":"true"}', bad(VALUE)),
    case("base64", SCALARS, b'{"bin":"aGVsbG8="}', [{"bin": b"hello"}]),
    case("one_byte", SCALARS, b'{"bin":"YQ=="}', [{"bin": b"a"}]),
    case("two_bytes", MIXED, b'{"bin":"YWI="}', [{"bin": b"ab"}]),
    case("empty", SCALARS, b'{"bin":""}', [{"bin": b""}]),
    case("space_between_groups", SCALARS, b'{"bin":"aGVs bG8="}', [{"bin": b"hello"}]),
    case("raw_tab_between_groups", MIXED, b'{"bin":"aGVs\tbG8="}', [{"bin": b"hello"}]),
    case("escaped_newline_between_groups", SCALARS, b'{"bin":"aGVs\\nbG8="}', [{"bin": b"hello"}]),
    case("hex_escaped_letter", MIXED, b'{"bin":"\\u0061GVs"}', [{"bin": b"hel"}]),
    case("padding_then_more", MIXED, b'{"bin":"YQ==YQ=="}', [{"bin": b"aa"}]),
    case("single_quoted", BYTES, b"{'bin':'aGVs','a':1}", [{"a": 1, "bin": b"hel"}]),
    case("no_padding", SCALARS, b'{"bin":"aGVsbG8"}', bad(VALUE)),
    case("short_padding", SCALARS, b'{"bin":"YQ="}', bad(VALUE)),
    case("not_base64", SCALARS, b'{"bin":"not base64!"}', bad(VALUE)),
    case("letter_after_padding", SCALARS, b'{"bin":"aGVsbG8=x"}', bad(VALUE)),
    case("space_inside_group", MIXED, b'{"bin":"aG Vs"}', bad(VALUE)),
    case("padding_too_early", MIXED, b'{"bin":"Y==="}', bad(VALUE)),
    case("number", SCALARS, b'{"bin":1}', bad(VALUE)),
    case("bad_then_next_field", BYTES, b'{"bin":"no!","a":1}', bad(VALUE, {"a": 1})),
    case("raw_tab_in_group_then", BASE64, b'{"bin":"aG\tVs","a":1}', bad(VALUE, {"a": 1})),
    case("single_quoted_raw_tab", BASE64, b"{'bin':'aGVs\tbG8=','a':1}", bad(JSON)),
    case("bad_utf8_then", BASE64, b'{"bin":"aGVs\xffbG8=","a":1}', bad(VALUE, {"a": 1})),
]

NESTING = [
    case("struct", NESTED, b'{"st":{"x":1,"y":"a"},"z":1}', [{"st": {"x": 1, "y": "a"}, "z": 1}]),
    case("struct_number", NESTED, b'{"st":1,"z":1}', bad(VALUE, {"z": 1})),
    case("struct_repeated_key", NESTED, b'{"st":{"x":1,"x":2}}', [{"st": {"x": 2, "y": None}}]),
    case("struct_then_null", NESTED, b'{"z":1,"st":{"x":1,"y":"a"},"st":null}', [{"z": 1}]),
    case("struct_twice", NESTED, b'{"st":{"x":1},"st":{"y":"b"}}', [{"st": {"x": None, "y": "b"}}]),
    case(
        "struct_bad_field",
        NESTED,
        b'{"st":{"x":"bad","y":"a"},"z":1}',
        bad(VALUE, {"st": {"x": None, "y": "a"}, "z": 1}),
    ),
    case(
        "struct_bad_last_field",
        NESTED,
        b'{"st":{"y":"a","x":"bad"},"z":1}',
        bad(VALUE, {"st": {"x": None, "y": "a"}, "z": 1}),
    ),
    case(
        "two_bad_columns",
        FULL,
        b'{"st":{"x":"bad","y":"a"},"z":"bad2","arr":[3]}',
        bad(VALUE, {"st": {"x": None, "y": "a"}, "arr": [3]}),
    ),
    case(
        "nested_structs",
        STRUCTS,
        b'{"s":{"a":{"b":{"c":1}}},"z":2}',
        [{"s": {"a": {"b": {"c": 1}}}, "z": 2}],
    ),
    case(
        "nested_struct_bad_field",
        STRUCTS,
        b'{"s":{"a":{"b":{"c":"x"},"q":1}},"z":2}',
        bad(VALUE, {"s": {"a": {"b": {"c": None}}}, "z": 2}),
    ),
    case("array", NESTED, b'{"arr":[1,2,null],"z":1}', [{"arr": [1, 2, None], "z": 1}]),
    case("empty_array", NESTED, b'{"arr":[],"z":1}', [{"arr": [], "z": 1}]),
    case("array_string", NESTED, b'{"arr":"x","z":1}', bad(VALUE, {"z": 1})),
    case("array_bad_element", NESTED, b'{"arr":[1,"x",3],"z":1}', bad(VALUE, {"z": 1})),
    case(
        "array_bad_element_then",
        NESTED,
        b'{"arr":[1,"x",3],"z":1,"st":{"x":5}}',
        bad(VALUE, {"st": {"x": 5, "y": None}, "z": 1}),
    ),
    case(
        "array_bad_element_hides",
        NESTED,
        b'{"arr":["x",{"z":9},5],"st":{"x":2}}',
        bad(VALUE, {"st": {"x": 2, "y": None}}),
    ),
    case("array_bad_array_element", NESTED, b'{"arr":[1,[2]],"z":1}', bad(VALUE, {"z": 1})),
    case("array_bad_bracket", LISTS, b'{"arr":[},"z":1}', bad(JSON)),
    case("arrays", MAPS, b'{"aa":[[1],[],null],"z":1}', [{"aa": [[1], [], None], "z": 1}]),
    case("arrays_bad_element", MAPS, b'{"aa":[[1,"x",2],[3]],"z":1}', bad(VALUE, {"z": 1})),
    case(
        "array_struct_bad_field",
        ROWS,
        b'{"as":[{"x":1},{"x":"bad"},{"x":3}],"z":1}',
        bad(VALUE, {"as": [{"x": 1}, {"x": None}, {"x": 3}], "z": 1}),
    ),
    case(
        "array_number_in_structs", ROWS, b'{"as":[{"x":1},5,{"x":3}],"z":1}', bad(VALUE, {"z": 1})
    ),
    case(
        "array_null_in_structs",
        ROWS,
        b'{"as":[{"x":1},null],"z":1}',
        [{"as": [{"x": 1}, None], "z": 1}],
    ),
    case(
        "arrays_struct_bad_field",
        LISTS,
        b'{"aas":[[{"x":"b"},{"x":1}],[{"x":2}]],"z":1}',
        bad(VALUE, {"aas": [[{"x": None}, {"x": 1}], [{"x": 2}]], "z": 1}),
    ),
    case(
        "row_with_bad_array_element",
        LISTS,
        b'[{"arr":[1,"x"],"z":1},{"z":2}]',
        bad(VALUE, {"z": 1}, {"z": 2}),
    ),
    case(
        "map_repeated_key",
        NESTED,
        b'{"m":{"k":1,"k":2},"z":1}',
        [{"m": [("k", 1), ("k", 2)], "z": 1}],
    ),
    case("empty_map", NESTED, b'{"m":{},"z":1}', [{"m": [], "z": 1}]),
    case("map_null_value", NESTED, b'{"m":{"k":null},"z":1}', [{"m": [("k", None)], "z": 1}]),
    case("map_array", NESTED, b'{"m":[1],"z":1}', bad(VALUE, {"z": 1})),
    case("map_bad_value", NESTED, b'{"m":{"k":1,"j":"x","l":3},"z":1}', bad(VALUE, {"z": 1})),
    case("map_repeated_key_bad", FULL, b'{"m":{"k":1,"k":"x"},"z":1}', bad(VALUE, {"z": 1})),
    case("map_empty_key", MAPS, b'{"m":{"":{"x":1}},"z":1}', [{"m": [("", {"x": 1})], "z": 1}]),
    case(
        "map_struct_bad_field",
        MAPS,
        b'{"m":{"k":{"x":"bad"},"j":{"x":2}},"z":1}',
        bad(VALUE, {"m": [("k", {"x": None}), ("j", {"x": 2})], "z": 1}),
    ),
    case(
        "map_bad_array_element", LISTS, b'{"m":{"k":[1,"x"],"j":[2]},"z":1}', bad(VALUE, {"z": 1})
    ),
    case("map_lone_surrogate_key", LISTS, b'{"ms":{"\\ud800":"x"},"z":1}', bad(JSON)),
]

OPTIONS = [
    case("comment", TRIO, b'{"a":1 /* c */, "b":"x"}', [{"a": 1, "b": "x"}], COMMENTS),
    case("line_comment_after", TRIO, b'{"a":1} // c', [{"a": 1}], COMMENTS),
    case("only_a_comment", TRIO, b"// only comment", [], COMMENTS),
    case("comment_before", TRIO, b'/* c */ {"a":1}', [{"a": 1}], COMMENTS),
    case(
        "comment_kept_in_text",
        TRIO,
        b'{"a":1,"b":{"x":/*c*/1}}',
        [{"a": 1, "b": '{"x":/*c*/1}'}],
        COMMENTS,
    ),
    case("comments_around_colon", PLAIN, b'{"a" /*c*/ : /*d*/ 1}', [{"a": 1}], COMMENTS),
    case("hash_comment", TRIO, b"# c", bad(JSON), COMMENTS),
    case("open_comment", TRIO, b'{"a":1 /* unterminated', bad(JSON), COMMENTS),
    case("line_comment_to_the_end", TRIO, b'{"a":1, // c', bad(JSON), COMMENTS),
    case("lone_slash", TRIO, b'{"a":1 / }', bad(JSON), COMMENTS),
    case("control_char_in_comment", PLAIN, b'{"a":1 /* \x01 */}', bad(JSON), COMMENTS),
    case("unquoted", TRIO, b"{a:1}", [{"a": 1}], UNQUOTED),
    case("unquoted_dash", TRIO, b"{a-b:1, a:2}", [{"a": 2}], UNQUOTED),
    case("unquoted_digit_first", TRIO, b"{1a:1,a:2}", [{"a": 2}], UNQUOTED),
    case("unquoted_hash", TRIO, b"{a#b:1,a:3}", [{"a": 3}], UNQUOTED),
    case("unquoted_a_umlaut", BYTES, b"{\xc3\xa4:1,a:2}", [{"a": 2}], UNQUOTED),
    case("unquoted_e_acute", TRIO, b"{\xc3\xa9:1,a:2}", bad(JSON), UNQUOTED),
    case("unquoted_cjk", TRIO, b"{\xe4\xb8\xad:1,a:5}", bad(JSON), UNQUOTED),
    case("unquoted_space", TRIO, b"{a b:1}", bad(JSON), UNQUOTED),
    case("unquoted_dot", TRIO, b"{a.b:1}", bad(JSON), UNQUOTED),
    case("unquoted_value", TRIO, b"{a:x}", bad(JSON), UNQUOTED),
    case("single_quoted_name_off", TRIO, b"{'a':1}", bad(JSON), NO_SINGLE),
    case("single_quoted_value_off", TRIO, b'{"a":1,"b":\'x\'}', bad(JSON), NO_SINGLE),
    case("escaped_quote_off", TRIO, b'{"a":1,"b":"it\\\'s"}', bad(JSON), NO_SINGLE),
    case("leading_zeros", TRIO, b'{"a":007}', [{"a": 7}], ZEROS_OK),
    case("minus_leading_zeros", TRIO, b'{"a":-007}', [{"a": -7}], ZEROS_OK),
    case("zero_zero", TRIO, b'{"a":00}', [{"a": 0}], ZEROS_OK),
    case("zero_zero_fraction", TRIO, b'{"d":00.5}', [{"d": 0.5}], ZEROS_OK),
    case("leading_zeros_exponent", TRIO, b'{"d":007.5e1}', [{"d": 75.0}], ZEROS_OK),
    case("leading_zeros_text", TRIO, b'{"a":1,"b":007}', [{"a": 1, "b": "007"}], ZEROS_OK),
    case("leading_zeros_fraction_as_int", ZEROS, b'{"i":-00.5}', bad(VALUE), ZEROS_OK),
    case("escaped_letters", TRIO, b'{"b":"\\q\\\'\\$"}', [{"b": "q'$"}], ANY_ESCAPE),
    case("escaped_x", TRIO, b'{"b":"\\x41"}', [{"b": "x41"}], ANY_ESCAPE),
    case("raw_tab", TRIO, b'{"b":"x\ty"}', [{"b": "x\ty"}], CONTROL),
    case("raw_control_char", TRIO, b'{"b":"x\x01y"}', [{"b": "x\x01y"}], CONTROL),
    case("raw_tab_in_name", TRIO, b'{"b\t":1,"a":2}', [{"a": 2}], CONTROL),
    case("raw_tab_in_text", TRIO, b'{"b":{"k":"x\ty"}}', [{"b": '{"k":"x\ty"}'}], CONTROL),
    case(
        "primitives_as_string",
        TRIO,
        b'{"a":1,"b":2,"d":3}',
        [{"a": 1, "b": "2", "d": 3.0}],
        AS_STRING,
    ),
    case(
        "prefers_decimal",
        TRIO,
        b'{"a":1,"b":2.5,"d":3.25}',
        [{"a": 1, "b": "2.5", "d": 3.25}],
        DECIMAL_PREF,
    ),
]

BYTE_ERRORS = [
    case("four_bytes", PLAIN, b'{"a":1,"b":"\xf0\x9f\x98\x80"}', [{"a": 1, "b": "😀"}]),
    case("bad_byte", PLAIN, b'{"a":1,"b":"\xff"}', bad(UTF8)),
    case("bad_byte_in_skipped_field", PLAIN, b'{"a":1,"zz":"\xff"}', bad(UTF8)),
    case("continuation_byte", PLAIN, b'{"a":1,"b":"\x80"}', bad(UTF8)),
    case("bad_byte_in_name", PLAIN, b'{"\xff":1,"a":2}', bad(UTF8)),
    case("bad_byte_after_the_document", PLAIN, b'{"a":1}\xff', [{"a": 1}]),
    case("cut_sequence_then_end", PLAIN, b'{"a":1,"b":"\xe2\x82"}', bad(UTF8, {"a": 1})),
    case("cut_sequence_then", PLAIN, b'{"b":"\xe2\x82","a":1}', bad(UTF8, {"a": 1})),
    case("overlong_nul", PLAIN, b'{"a":1,"b":"\xc0\x80"}', [{"a": 1, "b": "\x00"}]),
    case("overlong_three_bytes", PLAIN, b'{"a":1,"b":"\xe0\x80\x80"}', [{"a": 1, "b": "\x00"}]),
    case("overlong_slash", PLAIN, b'{"a":1,"b":"\xc0\xaf"}', [{"a": 1, "b": "/"}]),
    case("encoded_surrogate", PLAIN, b'{"a":1,"b":"\xed\xa0\x80"}', bad(UTF8)),
]

RECOVERY = [
    case("raw_tab_then", PLAIN, b'{"b":"x\ty","a":1}', bad(JSON)),
    case("bad_escape_then", PLAIN, b'{"b":"\\q","a":1}', bad(JSON)),
    case("short_hex_escape_then", PLAIN, b'{"b":"\\u12","a":1}', bad(JSON, {"a": 1})),
    case("bad_literal_skipped", PLAIN, b'{"a":1,"b":"x","zz":[1,tru]}', bad(JSON)),
    case("bad_literal_in_array", NESTED, b'{"arr":[1,tru],"z":1}', bad(JSON)),
    case("cut_in_nested_name", FULL, b'{"z":1,"st":{"x', bad(JSON)),
    case("cut_after_nested_name", FULL, b'{"z":1,"st":{"x"', bad(JSON, {"z": 1})),
    case("cut_after_nested_colon", FULL, b'{"z":1,"st":{"x":', bad(JSON, {"z": 1})),
    case("cut_after_nested_value", FULL, b'{"z":1,"st":{"x":1', bad(JSON)),
    case("cut_in_nested_string", FULL, b'{"z":1,"st":{"x":1,"y":"', bad(JSON)),
    case(
        "cut_in_array_of_structs",
        FULL,
        b'{"z":1,"st":{"x":1,"y":"abc"},"arr":[1,2],"as":[{"x"',
        bad(JSON, {"st": {"x": 1, "y": "abc"}, "arr": [1, 2], "z": 1}),
    ),
    case(
        "cut_after_map_key",
        FULL,
        b'{"z":1,"st":{"x":1,"y":"abc"},"arr":[1,2],"as":[{"x":5}],"m":{"k"',
        bad(JSON, {"st": {"x": 1, "y": "abc"}, "arr": [1, 2], "z": 1, "as": [{"x": 5}]}),
    ),
    case("missing_comma_in_struct", FULL, b'{"z":1,"st":{"x":1 "y":"a"},"arr":[1]}', bad(JSON)),
    case(
        "trailing_comma_in_struct",
        FULL,
        b'{"z":1,"st":{"x":1,"y":"a",},"arr":[1]}',
        bad(JSON, {"arr": [1], "z": 1}),
    ),
    case("bad_literal_in_struct", FULL, b'{"z":1,"st":{"x":tru},"arr":[1]}', bad(JSON, {"z": 1})),
    case(
        "bad_bracket_in_struct",
        FULL,
        b'{"z":1,"st":{"x":1,"y":"a"],"arr":[1]}',
        bad(JSON, {"arr": [1], "z": 1}),
    ),
    case(
        "bad_literal_in_structs", FULL, b'{"z":1,"as":[{"x":tru}],"arr":[1]}', bad(JSON, {"z": 1})
    ),
    case("bad_literal_in_map", FULL, b'{"z":1,"m":{"k":tru},"arr":[1]}', bad(JSON, {"z": 1})),
    case("raw_tab_in_struct", FULL, b'{"z":1,"st":{"y":"a\tb"},"arr":[1]}', bad(JSON)),
    case("missing_colon", FULL, b'{"z":1,"st" {"x":1}}', bad(JSON)),
    case(
        "bad_literal_deep",
        STRUCTS,
        b'{"z":2,"s":{"a":{"b":{"c":tru}}}}',
        bad(JSON, {"s": {"a": {"b": None}}, "z": 2}),
    ),
    case("cut_in_nested_struct", STRUCTS, b'{"z":2,"s":{"a":{"b":{"c":', bad(JSON)),
]

MULTILINE = [
    case(
        "text_kept_exactly",
        PLAIN,
        b'{\n "a": 1,\n "b": {"x": 1,  "y" : 1.50}\n}\n',
        [{"a": 1, "b": '{"x": 1,  "y" : 1.50}'}],
    ),
    case("array_of_rows", PLAIN, b'[{"a":1},\n{"a":2}]', [{"a": 1}, {"a": 2}]),
    case("second_document_ignored", PLAIN, b'{"a":1}\n{"a":2}\n', [{"a": 1}]),
    case("text_after_array", PLAIN, b'[{"a":1}]\n xyz', [{"a": 1}]),
    case("empty", PLAIN, b"", []),
    case("raw_newline_in_string", PLAIN, b'{"a":1, "b": "x\ny"}', bad(JSON)),
    case("bad_literal", PLAIN, b'{"a":1,\n"b":tru}\n', bad(JSON)),
    case("bad_byte", PLAIN, b'{"a":1,\n"b":"\xff"}\n', bad(UTF8)),
    case("bad_value", PLAIN, b'{"a":"x",\n"b":"y"}\n', bad(VALUE, {"b": "y"})),
    case("number_text", PLAIN, b'{"a":1,\n"b":1.00}\n', [{"a": 1, "b": "1.00"}]),
    case("crlf", PLAIN, b'{"a":1,\r\n"b":"x"}\r\n', [{"a": 1, "b": "x"}]),
    case("single_quoted_text", PLAIN, b"{'a':1,\n'b':{'k' : 'v'}}", [{"a": 1, "b": "{'k' : 'v'}"}]),
    case("only_a_comment", PLAIN, b"// x\n", [], COMMENTS),
    case("line_comment_to_cr", PLAIN, b'{"a":1, // c\r"b":"x"}', [{"a": 1, "b": "x"}], COMMENTS),
]

DATETIMES = [
    # the text goes to parse_datetime (here the ISO stand-in); numbers and empty text never do
    case("date", TIMES, b'{"dt":"2024-01-02"}', [{"dt": date(2024, 1, 2)}]),
    case(
        "timestamp",
        TIMES,
        b'{"ts":"2024-01-02T03:04:05Z"}',
        [{"ts": datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)}],
    ),
    case("unreadable_date", TIMES, b'{"dt":"x"}', bad(VALUE)),
    case("date_number", TIMES, b'{"dt":1}', bad(VALUE)),
    # a deliberate difference: Spark reads 2023-11-14 22:13:20 (the number as epoch seconds)
    case("timestamp_number", TIMES, b'{"ts":1700000000}', bad(VALUE)),
    case("timestamp_fraction", TIMES, b'{"ts":1.5}', bad(VALUE)),
    case("timestamp_ntz_number", TIMES, b'{"ntz":1}', bad(VALUE)),
    case("empty_date", TIMES, b'{"dt":""}', bad(VALUE)),
    case("empty_timestamp", TIMES, b'{"ts":""}', bad(VALUE)),
    case("empty_timestamp_ntz", TIMES, b'{"ntz":""}', bad(VALUE)),
]


def nest(levels: int) -> bytes:
    return b"[" * levels + b"]" * levels


LIMITS = [
    case(
        "depth_1000", DEEP, b'{"q":1,"b":' + nest(999) + b"}", [{"q": 1, "b": nest(999).decode()}]
    ),
    # Jackson stops inside the value and Spark reads on: the array's last "]" goes to b
    case(
        "depth_1001",
        DEEP,
        b'{"q":1,"b":' + nest(1000) + b"}",
        bad(JSON, {"q": 1, "b": "]"}),
    ),
    case("depth_1000_skipped", DEEP, b'{"q":1,"zz":' + nest(999) + b"}", [{"q": 1}]),
    case("depth_1001_skipped", DEEP, b'{"q":1,"zz":' + nest(1000) + b"}", bad(JSON)),
    case("depth_after_the_document", DEEP, b'{"q":1} ' + b"[" * 1000, [{"q": 1}]),
    case("digits_1000", DEEP, b'{"q":1,"b":' + b"1" * 1000 + b"}", [{"q": 1, "b": "1" * 1000}]),
    case("digits_1001", DEEP, b'{"q":1,"b":' + b"1" * 1001 + b"}", bad(JSON)),
    case("minus_and_1000_digits", MIXED, b'{"b":-' + b"1" * 1000 + b"}", [{"b": "-" + "1" * 1000}]),
    case("fraction_1000", MIXED, b'{"b":1.' + b"1" * 999 + b"}", [{"b": "1." + "1" * 999}]),
    case("fraction_1001", MIXED, b'{"b":1.' + b"1" * 1000 + b"}", bad(JSON)),
    case(
        "exponent_1000", MIXED, b'{"b":1.' + b"1" * 998 + b"e1}", [{"b": "1." + "1" * 998 + "e1"}]
    ),
    case("exponent_1001", MIXED, b'{"b":1.' + b"1" * 999 + b"e1}", bad(JSON)),
    case("objects_1000", PLAIN, b'{"a":1,"zz":' + b'{"k":' * 999 + b"1" + b"}" * 1000, [{"a": 1}]),
    case("objects_1001", PLAIN, b'{"a":1,"zz":' + b'{"k":' * 1000 + b"1" + b"}" * 1001, bad(JSON)),
    case("name_50000_bytes", PLAIN, b'{"' + b"n" * 50_000 + b'":1,"a":2}', [{"a": 2}]),
    case("name_50001_bytes", PLAIN, b'{"' + b"n" * 50_001 + b'":1,"a":2}', bad(JSON)),
    case("name_50002_bytes", PLAIN, b'{"' + "\u00e9".encode() * 25_001 + b'":1}', bad(JSON)),
]

SECTIONS = {
    "grammar": GRAMMAR,
    "strings": STRINGS,
    "integers": INTEGERS,
    "floats": FLOATS,
    "decimals": DECIMALS,
    "booleans-binary": BOOLEANS_AND_BINARY,
    "datetimes": DATETIMES,
    "nesting": NESTING,
    "options": OPTIONS,
    "bytes": BYTE_ERRORS,
    "recovery": RECOVERY,
    "limits": LIMITS,
    "multiline": MULTILINE,
}


@pytest.mark.parametrize(
    ("ddl", "options", "record", "expected"),
    [
        pytest.param(*param.values, id=f"{section}-{param.id}")
        for section, params in SECTIONS.items()
        for param in params
    ],
)
def test_reads_a_record_as_spark_does(
    ddl: str, options: SparkJsonOptions, record: bytes, expected: list[dict[str, Any]] | Bad
) -> None:
    check(ddl, options, record, expected)


def test_options_have_sparks_names_and_defaults() -> None:
    assert dataclasses.asdict(SparkJsonOptions()) == {
        "allow_comments": False,
        "allow_unquoted_field_names": False,
        "allow_single_quotes": True,
        "allow_numeric_leading_zeros": False,
        "allow_backslash_escaping_any_character": False,
        "allow_unquoted_control_chars": False,
        "allow_non_numeric_numbers": True,
        "primitives_as_string": False,
        "prefers_decimal": False,
    }


def test_a_problem_names_its_column_kind_and_position() -> None:
    nested = reader(NESTED, DEFAULT).read(b'{"z":1,"st":{"x":"bad"}}')
    assert nested.malformed == "column 'st.x': cannot read \"bad\" as INT"
    assert (MalformedKind(nested.kind or ""), nested.column) == (VALUE, "st")
    assert reader(PLAIN, DEFAULT).read(b'{"a":99999999999}').kind == RANGE
    utf8 = reader(PLAIN, DEFAULT).read(b'{"\xc3\xa9":1,"b":"\xff"}')  # the first problem is told
    assert (utf8.kind, utf8.column, utf8.position) == (UTF8, None, 13)  # a byte offset
    syntax = reader(PLAIN, DEFAULT).read('\ufeff{"\u00e9":1,}'.encode())
    assert (syntax.kind, syntax.position) == (JSON, 8)  # a character offset
    assert syntax.malformed == (
        "invalid JSON at character 8: expected '\"' to start a field name, got '}'"
    )


def test_rows_are_values_pyarrow_takes() -> None:
    # not a Spark check: the rows build a table of the schema
    ddl = (
        "id BIGINT, price DECIMAL(10,2), data BINARY, tags ARRAY<STRING>, "
        "attrs MAP<STRING, INT>, s STRUCT<x: DOUBLE, t: TIMESTAMP>, d DATE, f FLOAT"
    )
    record = (
        b'{"id": 7, "price": 1.005, "data": "aGk=", "tags": ["a", 1], "attrs": {"k": 1, "k": 2},'
        b' "s": {"x": NaN, "t": "2024-01-02T03:04:05+01:00"}, "d": "2024-01-02", "f": 0.1}'
    )
    rows = reader(ddl, DEFAULT).read(record).rows
    table = pa.Table.from_pylist(rows, schema=parse_ddl(ddl))
    assert table.num_rows == 1
    assert table.column("attrs").to_pylist() == [[("k", 1), ("k", 2)]]
    assert table.column("price").to_pylist() == [Decimal("1.01")]
    assert table.column("tags").to_pylist() == [["a", "1"]]


def test_deep_nesting_is_malformed_without_recursion() -> None:
    # beyond the 1,001 levels checked with Spark
    deep = b'{"a":1,"b":' + nest(100_000) + b"}"
    assert reader(PLAIN, DEFAULT).read(deep).kind == JSON
    assert reader(DEEP, DEFAULT).read(b'{"q":1,"zz":' + b'[{"x":' * 50_000).kind == JSON


@pytest.mark.parametrize(
    "dtype",
    [pa.time32("s"), pa.map_(pa.int32(), pa.int32()), pa.float16(), pa.uint8(), pa.null()],
    ids=str,
)
def test_types_spark_does_not_read_are_refused(dtype: pa.DataType) -> None:
    # not a Spark check: Spark has no such types (or refuses MAP keys that are not strings)
    with pytest.raises(SchemaError, match="cannot read"):
        SparkJsonReader(pa.schema([pa.field("c", dtype)]), DEFAULT, iso)


def test_an_unreadable_datetime_is_malformed() -> None:
    # not a Spark check: parse_datetime may raise ValueError instead of giving None
    def parse(dtype: pa.DataType, text: str) -> Any:
        raise ValueError(text)

    result = SparkJsonReader(parse_ddl(TIMES), DEFAULT, parse).read(b'{"dt":"2024-01-02"}')
    assert (result.kind, result.column) == (VALUE, "dt")
