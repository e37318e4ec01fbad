"""More JSON reader cases for ``record_spark_readers.py`` (see ``reader_cases.py``): the JSON
grammar options (each ``allow*`` on and off), what Spark does with odd records (single quotes,
trailing text, repeated keys, top-level arrays, invalid UTF-8), values of every type,
``lineSep``, ``multiLine`` and the three modes on syntax errors."""

from __future__ import annotations

from reader_cases import ReaderCase


def _case(name: str, schema: str, *lines: str, note: str, **options: str) -> ReaderCase:
    text = "".join(f"{line}\n" for line in lines)
    return ReaderCase(
        name=name, format="json", input=text, schema=schema, options=options, note=note
    )


def _text(name: str, schema: str, text: str, note: str, **options: str) -> ReaderCase:
    return ReaderCase(
        name=name, format="json", input=text, schema=schema, options=options, note=note
    )


_AB = "a INT, b STRING, _corrupt_record STRING"

_SINGLE = ("{'a': 1, 'b': 'x'}", '{"a": 2, \'b\': "it\'s"}', "{'a': 3, 'b': 'it\\'s'}")
_COMMENTS = (
    '{"a": 1, /* inside */ "b": "x"}',
    '{"a": 2, "b": "y"} // after',
    '/* before */ {"a": 3}',
    '{"a": 4, "b": "/* not a comment */"}',
    '{"a": 5 # hash}',
)
_UNQUOTED = ('{a: 1, b: "x"}', '{"a": 2, b_2$: "y", b: "z"}', "{a-b: 3, a: 4}")
_ZEROS = ('{"a": 007, "d": 1.5}', '{"a": 0, "d": 00.5}', '{"a": -01, "d": 0.0}', '{"a": 00}')
_ESCAPES = ('{"b": "a\\qb"}', '{"b": "tab\\tok"}', '{"b": "\\\'"}', '{"b": "\\u00e9\\/"}')
_CONTROL = ('{"b": "tab\there"}', '{"b": "bell\x07"}', '{"b": "ok"}')
_NONNUMERIC = (
    '{"d": NaN, "f": NaN}',
    '{"d": Infinity, "f": -Infinity}',
    '{"d": +Infinity, "f": +INF}',
    '{"d": -INF, "f": 1.5}',
    '{"d": -NaN}',
    '{"d": "NaN", "f": "-Infinity"}',
    '{"d": "nan", "f": "Inf"}',
    '{"s": NaN}',
)

JSON_SYNTAX: list[ReaderCase] = [
    _case("json_single_quotes_default", _AB, *_SINGLE, note="single quotes are on by default"),
    _case(
        "json_single_quotes_off",
        _AB,
        *_SINGLE,
        allowSingleQuotes="false",
        note="allowSingleQuotes=false: single-quoted strings and names are malformed",
    ),
    _case("json_comments_off", _AB, *_COMMENTS, note="comments are off by default"),
    _case(
        "json_comments_on",
        _AB,
        *_COMMENTS,
        allowComments="true",
        note="allowComments: /* */ and // anywhere white space may be; # is no comment",
    ),
    _case("json_unquoted_names_off", _AB, *_UNQUOTED, note="unquoted field names are malformed"),
    _case(
        "json_unquoted_names_on",
        _AB,
        *_UNQUOTED,
        allowUnquotedFieldNames="true",
        note="allowUnquotedFieldNames: letters, digits, _ $ and - in names",
    ),
    _case(
        "json_leading_zeros_off",
        "a INT, d DOUBLE, _corrupt_record STRING",
        *_ZEROS,
        note="numbers with leading zeros are malformed by default",
    ),
    _case(
        "json_leading_zeros_on",
        "a INT, d DOUBLE, _corrupt_record STRING",
        *_ZEROS,
        allowNumericLeadingZeros="true",
        note="allowNumericLeadingZeros: 007 is 7, 00.5 is 0.5",
    ),
    _case(
        "json_backslash_escaping_off",
        "b STRING, _corrupt_record STRING",
        *_ESCAPES,
        note="an unknown escape is malformed by default; \\' is allowed with single quotes",
    ),
    _case(
        "json_backslash_escaping_on",
        "b STRING, _corrupt_record STRING",
        *_ESCAPES,
        allowBackslashEscapingAnyCharacter="true",
        note="allowBackslashEscapingAnyCharacter: \\q is q",
    ),
    _case(
        "json_control_chars_off",
        "b STRING, _corrupt_record STRING",
        *_CONTROL,
        note="raw control characters in strings are malformed by default",
    ),
    _case(
        "json_control_chars_on",
        "b STRING, _corrupt_record STRING",
        *_CONTROL,
        allowUnquotedControlChars="true",
        note="allowUnquotedControlChars: raw tab and bell kept",
    ),
    _case(
        "json_non_numeric_default",
        "d DOUBLE, f FLOAT, s STRING, _corrupt_record STRING",
        *_NONNUMERIC,
        note="NaN and infinity spellings, as numbers and as strings, and in a STRING column",
    ),
    _case(
        "json_non_numeric_off",
        "d DOUBLE, f FLOAT, s STRING, _corrupt_record STRING",
        *_NONNUMERIC,
        allowNonNumericNumbers="false",
        note="allowNonNumericNumbers=false: NaN and infinities as numbers or strings",
    ),
    _case(
        "json_duplicate_keys",
        "a INT, st STRUCT<x: INT, y: STRING>, _corrupt_record STRING",
        '{"a": 1, "a": 2}',
        '{"st": {"x": 1, "x": 2, "y": "p", "y": "q"}}',
        '{"a": 3, "a": "x"}',
        '{"a": "x", "a": 4}',
        '{"st": {"x": 5}, "st": {"y": "r"}}',
        note="a repeated key: the last value wins; a bad value before or after",
    ),
    _case(
        "json_documents_per_line",
        _AB,
        '{"a": 1} trailing',
        '{"a": 2}{"a": 3}',
        '{"a": 4} // comment',
        '{"a": 5}, {"a": 6}}',
        '[{"a": 1}, {"a": 2, "b": "x"}]',
        "[]",
        "[1, 2]",
        '[{"a": 3}, 4]',
        '[{"a": "bad"}, {"a": 5}]',
        "5",
        '"text"',
        "null",
        note="only the first document of a line counts (trailing text is ignored); a top-level "
        "array gives a row per object; scalars and null are malformed",
    ),
    _case(
        "json_string_column_keeps_source_text",
        "s STRING, _corrupt_record STRING",
        '{"s": 1.50}',
        '{"s": {"b": [1, 2], "c" : null}}',
        '{"s": true}',
        '{"s": 1e5}',
        '{"s": -0}',
        '{"s": [ 1 , "x" ]}',
        "{\"s\": {'k': 'v'}}",
        '{"s": "\\u00e9\\n"}',
        note="STRING takes numbers, booleans, objects and arrays as their source text",
    ),
    _case(
        "json_numbers",
        "t TINYINT, i INT, b BIGINT, f FLOAT, d DOUBLE, _corrupt_record STRING",
        '{"t": 127, "i": 2147483647, "b": 9223372036854775807, "f": 1.1, "d": 1.1}',
        '{"t": 128, "f": 1e39, "d": 1e400}',
        '{"t": 255, "f": 3.4028235e38, "d": -1e400}',
        '{"t": 256, "f": 1.00000005960464477539062500001, "d": 4.9e-324}',
        '{"t": -129, "f": 1e-50, "d": 123456789012345678901234567890}',
        '{"i": 2147483648, "f": "1.5", "d": "2"}',
        '{"i": 1.0, "b": 9223372036854775808, "f": 2, "d": -0.0}',
        '{"i": "1", "b": true}',
        note="TINYINT 128..255 wraps, other overflows are malformed; FLOAT rounded once from "
        "the text, overflow to infinity; strings of numbers",
    ),
    _case(
        "json_decimal_rounding",
        "x DECIMAL(7,2), y DECIMAL(38,0), _corrupt_record STRING",
        '{"x": 1.005, "y": 1.5}',
        '{"x": -1.005, "y": -2.5}',
        '{"x": 1.004, "y": 12345678901234567890123456789012345678}',
        '{"x": "2.345", "y": "1e3"}',
        '{"x": "1,234.5", "y": 0.5}',
        '{"x": 99999.995}',
        '{"x": 1e2, "y": 123456789012345678901234567890123456789}',
        '{"x": "abc"}',
        '{"x": -0.001}',
        note="decimals rounded half up, numeric strings with commas, precision overflow",
    ),
    _case(
        "json_nested_structs_and_arrays",
        "st STRUCT<x: INT, y: ARRAY<STRING>>, arr ARRAY<STRUCT<x: INT>>, z INT, "
        "_corrupt_record STRING",
        '{"st": {"x": 1, "y": ["a", "b"]}, "arr": [{"x": 1}, {"x": 2}], "z": 1}',
        '{"st": {"x": "bad", "y": ["c"]}, "z": 2}',
        '{"arr": [{"x": 3}, {"x": "bad"}, {"x": 4}], "z": 3}',
        '{"st": {"y": [1, {"k": 2}]}, "arr": [], "z": 4}',
        '{"st": [1], "z": 5}',
        '{"arr": {"x": 6}, "z": 6}',
        '{"arr": [null, {"x": 7}], "st": {}, "z": 7}',
        note="partly bad structs and arrays keep their good parts; STRING elements take text",
    ),
    _case(
        "json_maps_and_binary",
        "m MAP<STRING, INT>, ms MAP<STRING, STRING>, bin BINARY, z INT, _corrupt_record STRING",
        '{"m": {"a": 1, "a": 2, "b": 3}, "bin": "aGVsbG8=", "z": 1}',
        '{"m": {}, "ms": {"k": "v", "n": 5, "o": {"p": 1}}, "bin": "aGVsbG8", "z": 2}',
        '{"m": {"a": "x", "b": 4}, "bin": "not base64!", "z": 3}',
        '{"m": null, "ms": {"k": null}, "bin": "", "z": 4}',
        '{"m": [1], "bin": "aGVs bG8=", "z": 5}',
        '{"bin": 12, "z": 6}',
        note="a MAP keeps every entry, repeated keys too, a bad value makes it null; BINARY is "
        "padded base64 text",
    ),
    ReaderCase(
        name="json_invalid_utf8",
        format="json",
        input=(
            '{"a": 1, "b": "caf\xc3\xa9"}\n'
            '{"a": 2, "b": "bad \xff byte"}\n'
            '{"a": 3, "b": "cut \xe2\x82"}\n'
            '{"a": 4, "b": "surrogate \xed\xa0\x80"}\n'
            '{"a": 5, "b": "overlong \xc0\xaf"}\n'
            '{"a": 6, "\xff": 1}\n'
            '{"a": 7}\n'
        ),
        schema=_AB,
        raw_bytes=True,
        note="bytes that are not UTF-8 in values and names",
    ),
    _text(
        "json_line_separators_and_blank_lines",
        _AB,
        '{"a": 1}\r{"a": 2}\r\n{"a": 3}\n\r{"a": 4, "b": "x"}\r\r\n   \n\t\n  {"a": 5}  \n'
        '\ufeff{"a": 6}\n\f{"a": 7}\n{"a": 8}',
        note="the default separators: \\n, \\r\\n and a lone \\r; blank lines give no row; "
        "white space, a byte-order mark or a form feed before a record; the last one unended",
    ),
    _text(
        "json_line_sep_custom",
        _AB,
        '{"a": 1,\n "b": "x"};{"a": 2}\r\n;\n;{"a": "bad"};{"a": 3};',
        lineSep=";",
        note="lineSep=';': records hold line breaks; blank records give no row",
    ),
    _text(
        "json_line_sep_lf_only",
        _AB,
        '{"a": 1}\r{"a": 2}\n{"a": 3,\r "b": "y"}\r\n{"a": 4}\n',
        lineSep="\n",
        note="lineSep='\\n': a lone \\r is no separator (white space, or trailing text)",
    ),
    _text(
        "json_multiline_top_level_array",
        _AB,
        '[\n  {"a": 1,\n   "b": "x"},\n  {"a": 2}\n]\n{"a": 3}\n',
        multiLine="true",
        note="multiLine: the file is one record; a top-level array gives a row per element",
    ),
    _text(
        "json_multiline_malformed",
        _AB,
        '[\n  {"a": 1},\n  {"a": "bad", "b": "kept"}\n]\n',
        multiLine="true",
        note="multiLine with a bad value: every row keeps the whole file as corrupt record",
    ),
    _case(
        "json_mode_permissive_syntax",
        _AB,
        '{"a": 1, "b": "x"}',
        '{"a": 2, "b": }',
        '{"a": 3, "b": "y"',
        '{"a": "x", "b": "z"}',
        "{broken",
        '{"a": 4, "b": "w"}',
        mode="PERMISSIVE",
        note="PERMISSIVE on syntax errors: the record in _corrupt_record, the values kept",
    ),
    _case(
        "json_mode_dropmalformed_syntax",
        "a INT, b STRING",
        '{"a": 1, "b": "x"}',
        '{"a": 2, "b": }',
        '[{"a": 3}, {"a": "x"}]',
        '{"a": 4} trailing',
        mode="DROPMALFORMED",
        note="DROPMALFORMED drops invalid records, a whole array with a bad element",
    ),
    _case(
        "json_mode_failfast_syntax",
        "a INT, b STRING",
        '{"a": 1, "b": "x"}',
        '{"a": 2, "b": }',
        mode="FAILFAST",
        note="FAILFAST fails on a syntax error",
    ),
]
"""Cases of the JSON reader's syntax and value options."""
