"""Spark's CSV reading rules in ``microbatch_file._spark_csv`` (the tokenizer) and
``_spark_csv_values`` (the values), checked against Spark itself.

Expected values were recorded with pyspark 4.3.0 (Spark 4.3.0, univocity-parsers 2.9.1),
``local[1]``, ``spark.sql.session.timeZone=UTC``:

* ``READS`` and ``VALUES``: ``spark.read.schema(ddl).options(...).csv(path)`` on a file holding
  exactly the case's text; ``collect()`` gave the rows (or the read failed). ``VALUES`` are the
  single-column files among them, written as the token and the value Spark gave for it.
* ``TOKENS`` and ``STREAM``: Spark's own tokenizer, reached through PySpark's JVM gateway:
  ``CSVOptions(options).asParserSettings`` given to univocity's ``CsvParser``, then
  ``parseLine(line)`` (what Spark does per line) or ``beginParsing`` and ``parseNext`` (what
  Spark does with ``multiLine``), with ``emptyValue="<E>"`` to tell empty quoted fields apart.

Not verified with Spark (marked where they are used): line numbers, which are this module's
own; dates and timestamps, read by an ISO-only stand-in here (another module reads them as
Spark does); and the pyarrow comparison, which checks pyarrow against this module.
"""

from __future__ import annotations

import datetime
import decimal
import math
import random
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

from microbatch.types import parse_ddl
from microbatch_file._spark_csv import (
    CsvSyntaxError,
    SparkCsvOptions,
    arrow_fast_path_ok,
    arrow_parse_options,
    header_problem,
    records,
)
from microbatch_file._spark_csv_values import convert

BAD = "BAD"  # Spark found the value malformed: null, and the line in the corrupt record column


def _iso(dtype: pa.DataType, text: str) -> Any:
    """An ISO-only stand-in for Spark's datetime parsing (not Spark's rules)."""
    try:
        if pa.types.is_date(dtype):
            return datetime.date.fromisoformat(text)
        return datetime.datetime.fromisoformat(text)
    except ValueError:
        return None


def _plain(value: Any) -> Any:
    """A value as the recordings hold it."""
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, float) and math.isinf(value):
        return "Inf" if value > 0 else "-Inf"
    if isinstance(value, decimal.Decimal):
        return f"D{value}"
    return value


def _read(
    text: str,
    ddl: str,
    options: SparkCsvOptions,
    *,
    mode: str = "PERMISSIVE",
    header: bool = False,
    enforce_schema: bool = True,
    corrupt: str = "_corrupt_record",
) -> list[list[Any]]:
    """What ``spark.read.csv`` returns, from this module's pieces put together as a reader."""
    schema = parse_ddl(ddl)
    data = pa.schema([field for field in schema if field.name != corrupt])
    rows: list[list[Any]] = []
    for index, (tokens, line, raw) in enumerate(records(text, options)):
        if header and index == 0:
            problem = header_problem(tokens, data, options)
            if problem and not enforce_schema:
                raise ValueError(problem)
            continue
        values, reason = convert(tokens, data, options, _iso)
        if reason is not None and mode == "FAILFAST":
            raise RuntimeError(f"line {line}: {reason}")
        if reason is None or mode == "PERMISSIVE":
            row = [
                (raw if reason else None) if f.name == corrupt else _plain(values[f.name])
                for f in schema
            ]
            rows.append(row)
    return rows


# -- recorded with Spark ---------------------------------------------------------------------
# (options, line, tokens): one line read by Spark's tokenizer; None is null, "<E>" an empty
# quoted field, "ERROR" a failed read.
TOKENS: list[tuple[dict[str, Any], str, Any]] = [
    ({}, ',a",\\a\\x ', [None, 'a"', "\\a\\x "]),
    ({}, 'b\\ "\\aa, ",', ['b\\ "\\aa', ' "', None]),
    ({"ignore_leading_white_space": True}, '\\|,"""",\\,', ["\\|", '""', "\\", None]),
    ({"ignore_trailing_white_space": True}, "  ,a", "ERROR"),
    ({"escape": '"'}, "\\#a\\ ,,a\\|\\b", ["\\#a\\ ", None, "a\\|\\b"]),
    ({"quote": "'"}, '"";,, \t"\',,\\#', ['"";', None, " \t\"'", None, "\\#"]),
    ({"quote": ""}, ' |,",b"\\\\,,"', [" |", '"', 'b"\\\\', None, '"']),
    ({"escape": ""}, '"",;",,|",, ', ["<E>", ';"', None, '|"', None, " "]),
    ({"char_to_escape_quote_escaping": "#"}, '\\,,x\\",|"""|', ["\\", None, 'x\\"', '|"""|']),
    ({"unescaped_quote_handling": "STOP_AT_CLOSING_QUOTE"}, ' "\\|;,,""', [' "\\|;', None, "<E>"]),
    ({"unescaped_quote_handling": "SKIP_VALUE"}, '#\x00\\,,"\\,', ["#\x00\\", None, "\\,"]),
    ({"unescaped_quote_handling": "RAISE_ERROR"}, '"x"#\t #,', "ERROR"),
    ({"sep": ";"}, '\\bb;b,"";', ["\\bb", 'b,""', None]),
    ({"sep": "||"}, "\\||", ["\\", None]),
    ({"sep": "ab"}, 'b|",\x00b\\\tab"', ['b|",\x00b\\\t', '"']),
    ({"sep": "\t"}, '\\a ""\t', ['\\a ""', None]),
    ({"comment": "#"}, "\\, ,a\"';,',,", ["\\", " ", "a\"';", "'", None, None]),
    ({"comment": "#", "ignore_leading_white_space": True}, "\\,,\\\\", ["\\", None, "\\\\"]),
    ({"max_chars_per_column": 3}, '"bb||xb,ab\t#', "ERROR"),
    ({"max_columns": 3}, ', |,,"\'"\t', "ERROR"),
    ({"sep": "||", "unescaped_quote_handling": "SKIP_VALUE"}, "||,\\\\,", [None, ",\\\\,"]),
    ({"escape": "'", "quote": "'"}, '\t",,,\\,a\\",a"a', ['\t"', None, None, "\\", 'a\\"', 'a"a']),
    ({"max_chars_per_column": 2, "ignore_trailing_white_space": True}, "''\"|a\tx'\\", "ERROR"),
    ({"max_chars_per_column": 4, "escape": '"'}, 'x"",,\\ba\\#', "ERROR"),
    ({"sep": " "}, '\\ \\  \\"', ["\\", "\\", None, '\\"']),
    ({"sep": "a"}, "b\\a\\a\\\\a", ["b\\", "\\", "\\\\", None]),
    ({"sep": '"'}, '"a\\"\\\'aa,"', [None, "a\\", "\\'aa,", '"']),
    ({"sep": ",,"}, 'a\\",,', ['a\\"', None]),
    ({"sep": "|x|"}, "\"a\",b,'\"''", ["\"a\",b,'\"''"]),
    ({"sep": "||", "ignore_trailing_white_space": True}, '\x00||""| ', ["<E>", '"|" ']),
    ({"sep": "||", "unescaped_quote_handling": "RAISE_ERROR"}, '"#,,",a,""', "ERROR"),
    ({"sep": "||", "escape": '"'}, '||""xxb"a,"\\', [None, '""xxb"a,"\\']),
    ({"quote": "", "escape": ""}, '",", xx\\,,| ', ['"', '"', " xx\\", None, "| "]),
    ({"char_to_escape_quote_escaping": "'", "escape": "'"}, ',\\,x"",', [None, "\\", 'x""', None]),
    ({"comment": "a"}, ',\\\\,b#"', [None, "\\\\", 'b#"']),
    ({"comment": '"'}, 'bb",;,\\|,\\",', ['bb"', ";", "\\|", '\\"', None]),
]

# (options, text, [(tokens, raw text)]) read with multiLine
STREAM: list[tuple[dict[str, Any], str, Any]] = [
    (
        {},
        '\\a a"|;a#\n\\\\a\\\x00\x01,',
        [[['\\a a"|;a#'], '\\a a"|;a#'], [["\\\\a\\\x00\x01", None], "\\\\a\\\x00\x01,"]],
    ),
    (
        {"ignore_leading_white_space": True, "ignore_trailing_white_space": True},
        '"\\|" ,\\|,"x;"aa\\\n\x01\\"ab,\\;',
        [[["\\|", "\\|", '"x;"aa\\'], '"\\|" ,\\|,"x;"aa\\'], [['\\"ab', "\\;"], '\x01\\"ab,\\;']],
    ),
    (
        {"escape": '"'},
        ',\\\\"""x"\\,b"x|"|,b\\a," ',
        [[[None, '\\\\"""x"\\', 'b"x|"|', "b\\a", " "], ',\\\\"""x"\\,b"x|"|,b\\a," ']],
    ),
    ({"comment": "#"}, 'b||\\ x",', [[['b||\\ x"', None], 'b||\\ x",']]),
    ({"unescaped_quote_handling": "STOP_AT_CLOSING_QUOTE"}, '""', [[["<E>"], '""']]),
    (
        {"sep": "||"},
        '\'\\,\\\r\n " ba|";"#" \\ x\'b',
        [[["'\\,\\"], "'\\,\\"], [[' " ba|";"#" \\ x\'b'], ' " ba|";"#" \\ x\'b']],
    ),
    ({"line_sep": "\n"}, '" a', [[[" a"], '" a']]),
    ({"line_sep": "\r\n"}, "'", [[["'"], "'"]]),
    (
        {"line_sep": ";"},
        '\\\\\\b\r#;"\\ \rbb\n ,ax\r"\\ a#',
        [[["\\\\\\b\r#"], "\\\\\\b\r#;"], [['\\ \rbb\n ,ax\r"\\ a#'], '"\\ \rbb\n ,ax\r"\\ a#']],
    ),
    (
        {"unescaped_quote_handling": "BACK_TO_DELIMITER"},
        ',"\'b""x;\t\r\nx"#',
        [[[None, "'b\"x;\t"], ',"\'b""x;\t\r\nx"#'], [["x#"], ""]],
    ),
    (
        {"unescaped_quote_handling": "SKIP_VALUE"},
        '\r,\r\nxx"\n;,',
        [[[None, None], ","], [['xx"\n;', None], 'xx"\n;,']],
    ),
    (
        {"sep": "||", "unescaped_quote_handling": "BACK_TO_DELIMITER"},
        "'\r\n\n\x00xa|\n |b",
        [[["'"], "'"], [["\x00xa|"], "\x00xa|"], [[" |b"], " |b"]],
    ),
    (
        {"comment": "#", "line_sep": "\r\n"},
        "\r\n\",  \x00\\aa'bbx'a  ",
        [[[",  \x00\\aa'bbx'a  "], "\",  \x00\\aa'bbx'a  "]],
    ),
    (
        {"ignore_trailing_white_space": True},
        ',a baaab\n\n"\n\' b,";a";\t"',
        [[[None, "a baaab"], ",a baaab"], [['"\n\' b,";a";\t"'], '"\n\' b,";a";\t"']],
    ),
    ({"max_chars_per_column": 3}, '\\\'\t#a|a|\t|bb#\n""a\\";aa,",', "ERROR"),
    (
        {"sep": "||", "comment": "#", "ignore_leading_white_space": True},
        ' \\\'\\",b\na\\a",b\r\n\\\x00a";;\\|',
        [
            [["\\'\\\",b"], " \\'\\\",b"],
            [['a\\a",b\r'], 'a\\a",b'],
            [['\\\x00a";;\\|'], '\\\x00a";;\\|'],
        ],
    ),
    (
        {"quote": "'", "escape": "'"},
        '\nbxb"#a"\\ x;b,',
        [[['bxb"#a"\\ x;b', None], 'bxb"#a"\\ x;b,']],
    ),
]

S2 = "a STRING, b STRING"
S2C = "a STRING, b STRING, _corrupt_record STRING"
S3C = "a STRING, b STRING, c STRING, _corrupt_record STRING"
I2 = "a INT, b INT"
I2C = "a INT, b INT, _corrupt_record STRING"
READER_OPTIONS = ("mode", "header", "enforce_schema", "corrupt")

# (name, file text, schema, options and reader options, rows or ("error", kind))
READS: list[tuple[str, str, str, dict[str, Any], Any]] = [
    ("sep_multi", "1||2\nx||y||z\n", S2C, {"sep": "||"}, [["1", "2", None], ["x", "y", "x||y||z"]]),
    ("sep_tab_escape", "1\t2\n", S2C, {"sep": "\t"}, [["1", "2", None]]),
    ("quote_empty", '"a,b",c\n', S3C, {"quote": ""}, [['"a', 'b"', "c", None]]),
    ("quote_single", "'a,b',c\n", S2C, {"quote": "'"}, [["a,b", "c", None]]),
    ("escape_backslash", '"a\\"b",c\n', S2C, {}, [['a"b', "c", None]]),
    ("escape_doubled_default", '"a""b",c\n', S2C, {}, [['"a""b"', "c", None]]),
    (
        "escape_dq",
        '"a""b",c\n"a\\"b",c\n',
        S2C,
        {"escape": '"'},
        [['a"b', "c", None], ['"a\\"b"', "c", None]],
    ),
    ("ctqe_default", '"a\\\\",c\n"a\\\\b",c\n', S2C, {}, [["a\\", "c", None], ["a\\b", "c", None]]),
    (
        "ctqe_hash",
        '"a#\\",c\n"a\\\\",c\n',
        S2C,
        {"char_to_escape_quote_escaping": "#"},
        [["a\\", "c", None], ['a\\",c', None, '"a\\\\",c']],
    ),
    ("comment_default", "#a,b\n1,2\n", S2C, {}, [["#a", "b", None], ["1", "2", None]]),
    (
        "comment_hash",
        "#a,b\n1,2\n #c,d\n",
        S2C,
        {"comment": "#"},
        [["1", "2", None], [" #c", "d", None]],
    ),
    (
        "comment_hash_ml",
        "#a,b\n1,2\n #c,d\n",
        S2C,
        {"comment": "#", "multi_line": True},
        [["1", "2", None], [" #c", "d", None]],
    ),
    (
        "ws_default",
        ' a , b \n" a " , " b "\n',
        S2C,
        {},
        [[" a ", " b ", None], [" a ", ' " b "', None]],
    ),
    (
        "ws_both",
        ' a , b \n" a " , " b "\n',
        S2C,
        {"ignore_leading_white_space": True, "ignore_trailing_white_space": True},
        [["a", "b", None], [" a ", " b ", None]],
    ),
    (
        "uqh_STOP_AT_DELIMITER",
        'a"b,c\n"a"b",c\n"a,b"c,d\n',
        S2C,
        {"unescaped_quote_handling": "STOP_AT_DELIMITER"},
        [['a"b', "c", None], ['"a"b"', "c", None], ['"a,b"c', "d", None]],
    ),
    (
        "uqh_BACK_TO_DELIMITER",
        'a"b,c\n"a"b",c\n"a,b"c,d\n',
        S2C,
        {"unescaped_quote_handling": "BACK_TO_DELIMITER"},
        [['a"b', "c", None], ["ab", "c", None], ["a", "bc,d", None]],
    ),
    (
        "uqh_STOP_AT_CLOSING_QUOTE",
        'a"b,c\n"a"b",c\n"a,b"c,d\n',
        S2C,
        {"unescaped_quote_handling": "STOP_AT_CLOSING_QUOTE"},
        [['a"b', "c", None], ['a"b', "c", None], ['a,b"c,d', None, '"a,b"c,d']],
    ),
    (
        "uqh_SKIP_VALUE",
        'a"b,c\n"a"b",c\n"a,b"c,d\n',
        S2C,
        {"unescaped_quote_handling": "SKIP_VALUE"},
        [['a"b', "c", None], [None, "c", None], [None, "d", None]],
    ),
    (
        "uqh_RAISE_ERROR",
        'a"b,c\n"a"b",c\n"a,b"c,d\n',
        S2C,
        {"unescaped_quote_handling": "RAISE_ERROR"},
        ("error", "syntax"),
    ),
    (
        "uqh_raise_dropmalformed",
        '"a"b",c\nx,y\n',
        S2,
        {"unescaped_quote_handling": "RAISE_ERROR", "mode": "DROPMALFORMED"},
        ("error", "syntax"),
    ),
    ("max_columns", "1,2,3\n4,5\n", S2C, {"max_columns": 2}, ("error", "syntax")),
    ("max_chars", "abcd,x\nab,y\n", S2C, {"max_chars_per_column": 3}, ("error", "syntax")),
    (
        "max_chars_drop",
        "abcd,x\nab,y\n",
        S2,
        {"max_chars_per_column": 3, "mode": "DROPMALFORMED"},
        ("error", "syntax"),
    ),
    (
        "multiline_off",
        '1,"a\nb"\n2,c\n',
        S2C,
        {},
        [["1", "a", None], ['b"', None, 'b"'], ["2", "c", None]],
    ),
    (
        "multiline_on",
        '1,"a\nb"\n2,c\n',
        S2C,
        {"multi_line": True},
        [["1", "a\nb", None], ["2", "c", None]],
    ),
    (
        "multiline_crlf_in_quotes",
        '1,"a\r\nb"\r\n2,c\r\n',
        S2C,
        {"multi_line": True},
        [["1", "a\nb", None], ["2", "c", None]],
    ),
    (
        "endings_mixed",
        "1,a\r\n2,b\r3,c\n4,d",
        S2C,
        {},
        [["1", "a", None], ["2", "b", None], ["3", "c", None], ["4", "d", None]],
    ),
    (
        "endings_mixed_ml",
        "1,a\r\n2,b\r3,c\n4,d",
        S2C,
        {"multi_line": True},
        [["1", "a", None], ["2", "b\r3", "2,b\r3,c\n4,d"]],
    ),
    (
        "endings_cr_ml",
        "1,a\r2,b\r",
        S2C,
        {"multi_line": True},
        [["1", "a", None], ["2", "b", None]],
    ),
    (
        "linesep_semicolon",
        "1,a;2,b\n3;4,c;",
        S2C,
        {"line_sep": ";"},
        [["1", "a", None], ["2", "b\n3", None], ["4", "c", None]],
    ),
    (
        "linesep_semicolon_ml",
        '1,a;2,"b;x"\n3;4,c;',
        S2C,
        {"line_sep": ";", "multi_line": True},
        [["1", "a", None], ["2", '"b;x"\n3', None], ["4", "c", None]],
    ),
    (
        "linesep_crlf",
        "1,a\r\n2,b\n3,c\r\n",
        S2C,
        {"line_sep": "\r\n"},
        [["1", "a", None], ["2", "b\n3", "2,b\n3,c"]],
    ),
    ("empty_lines", "1,a\n\n\n2,b\n", S2C, {}, [["1", "a", None], ["2", "b", None]]),
    ("ws_lines", "1,a\n   \n\t\n\x01\n2,b\n", S2C, {}, [["1", "a", None], ["2", "b", None]]),
    (
        "ws_lines_ml",
        "1,a\n   \n2,b\n",
        S2C,
        {"multi_line": True},
        [["1", "a", None], ["   ", None, "   "], ["2", "b", None]],
    ),
    (
        "empty_lines_ml",
        "1,a\n\n\r\n2,b\n",
        S2C,
        {"multi_line": True},
        [["1", "a", None], ["\r", None, ""], ["2", "b", None]],
    ),
    ("bom", "\ufeff1,a\n2,b\n", S2C, {}, [["1", "a", None], ["2", "b", None]]),
    ("bom_ml", "\ufeff1,a\n2,b\n", S2C, {"multi_line": True}, [["1", "a", None], ["2", "b", None]]),
    ("unclosed_quote", '1,"abc\n2,b\n', S2C, {}, [["1", "abc", None], ["2", "b", None]]),
    ("unclosed_quote_ml", '1,"abc\n2,b\n', S2C, {"multi_line": True}, [["1", "abc\n2,b\n", None]]),
    ("corrupt_raw_spaces", "  1 \n", S2C, {}, [["  1 ", None, "  1 "]]),
    (
        "corrupt_raw_ml_crlf",
        "1\r\n2,b\r\n",
        S2C,
        {"multi_line": True},
        [["1", None, "1"], ["2", "b", None]],
    ),
    (
        "corrupt_middle",
        "1,2\n3\n",
        "a INT, _corrupt_record STRING, b INT",
        {},
        [[1, None, 2], [3, "3", None]],
    ),
    ("str_empties", 'x,,""\n', S3C, {}, [["x", None, None, None]]),
    ("str_empty_value", 'x,,""\n', S3C, {"empty_value": "E"}, [["x", None, "E", None]]),
    (
        "str_null_na",
        'NA,,"","NA"\n',
        "a STRING, b STRING, c STRING, d STRING, _corrupt_record STRING",
        {"null_value": "NA"},
        [[None, None, "", None, None]],
    ),
    (
        "int_empties",
        '1,,""\n',
        "a INT, b INT, c INT, _corrupt_record STRING",
        {},
        [[1, None, None, None]],
    ),
    (
        "int_empties_na",
        '1,,"",NA\n',
        "a INT, b INT, c INT, d INT, _corrupt_record STRING",
        {"null_value": "NA"},
        [[1, None, None, None, '1,,"",NA']],
    ),
    ("int_empty_value", '1,""\n', I2C, {"empty_value": "7"}, [[1, 7, None]]),
    ("few_PERMISSIVE", "1,2\n3\n", I2C, {"mode": "PERMISSIVE"}, [[1, 2, None], [3, None, "3"]]),
    (
        "many_PERMISSIVE",
        "1,2\n3,4,5\n",
        I2C,
        {"mode": "PERMISSIVE"},
        [[1, 2, None], [3, 4, "3,4,5"]],
    ),
    (
        "bad_PERMISSIVE",
        "1,2\nx,4\n5,y\n",
        I2C,
        {"mode": "PERMISSIVE"},
        [[1, 2, None], [None, 4, "x,4"], [5, None, "5,y"]],
    ),
    ("few_DROPMALFORMED", "1,2\n3\n", I2, {"mode": "DROPMALFORMED"}, [[1, 2]]),
    ("many_DROPMALFORMED", "1,2\n3,4,5\n", I2, {"mode": "DROPMALFORMED"}, [[1, 2]]),
    ("bad_DROPMALFORMED", "1,2\nx,4\n5,y\n", I2, {"mode": "DROPMALFORMED"}, [[1, 2]]),
    ("few_FAILFAST", "1,2\n3\n", I2, {"mode": "FAILFAST"}, ("error", "malformed")),
    ("many_FAILFAST", "1,2\n3,4,5\n", I2, {"mode": "FAILFAST"}, ("error", "malformed")),
    ("bad_FAILFAST", "1,2\nx,4\n5,y\n", I2, {"mode": "FAILFAST"}, ("error", "malformed")),
    (
        "few_permissive_nocorrupt",
        "1,2\n3\nx,4\n3,4,5\n",
        I2,
        {},
        [[1, 2], [3, None], [None, 4], [3, 4]],
    ),
    ("bad_both_fields", "x,y\n", I2C, {}, [[None, None, "x,y"]]),
    ("corrupt_renamed", "1\n", "a INT, b INT, bad STRING", {"corrupt": "bad"}, [[1, None, "1"]]),
    ("hdr_enforce_true", "x,y\n1,2\n", I2, {"header": True}, [[1, 2]]),
    (
        "hdr_enforce_false_match",
        "a,b\n1,2\n",
        I2,
        {"header": True, "enforce_schema": False},
        [[1, 2]],
    ),
    (
        "hdr_enforce_false_case",
        "A,B\n1,2\n",
        I2,
        {"header": True, "enforce_schema": False},
        [[1, 2]],
    ),
    (
        "hdr_enforce_false_mismatch",
        "x,y\n1,2\n",
        I2,
        {"header": True, "enforce_schema": False},
        ("error", "header"),
    ),
    (
        "hdr_enforce_false_count",
        "a,b,c\n1,2,3\n",
        I2,
        {"header": True, "enforce_schema": False},
        ("error", "header"),
    ),
    (
        "hdr_enforce_false_corrupt",
        "a,b\n1,2\n3\n",
        I2C,
        {"header": True, "enforce_schema": False},
        [[1, 2, None], [3, None, "3"]],
    ),
    (
        "hdr_enforce_false_quoted_ws",
        '" a ",b\n1,2\n',
        I2,
        {"header": True, "enforce_schema": False},
        ("error", "header"),
    ),
    ("hdr_blank_first", "\n\na,b\n1,2\n", I2, {"header": True}, [[1, 2]]),
    ("hdr_comment_first", "#c\na,b\n1,2\n", I2, {"comment": "#", "header": True}, [[1, 2]]),
    ("hdr_ml", 'a,"b\nc"\n1,2\n', I2, {"multi_line": True, "header": True}, [[1, 2]]),
    (
        "hdr_enforce_false_null_name",
        ",b\n1,2\n",
        I2,
        {"null_value": "a", "header": True, "enforce_schema": False},
        [[1, 2]],
    ),
    ("few_and_bad", "x\n", I2C, {}, [[None, None, "x"]]),
    ("many_and_bad", "x,4,5\n", I2C, {}, [[None, 4, "x,4,5"]]),
    (
        "ml_comment_raw",
        "#c\n1\n2,3\n",
        I2C,
        {"multi_line": True, "comment": "#"},
        [[1, None, "1"], [2, 3, None]],
    ),
    (
        "ml_short_0",
        "1\r",
        "a STRING, _corrupt_record STRING",
        {"multi_line": True},
        [["1\r", None]],
    ),
    (
        "ml_short_3",
        "1234\r",
        "a STRING, _corrupt_record STRING",
        {"multi_line": True},
        [["1234", None]],
    ),
    (
        "ml_short_4",
        "1\r2\r",
        "a STRING, _corrupt_record STRING",
        {"multi_line": True},
        [["1", None], ["2\r", None]],
    ),
    ("nonml_cr_only", "1,a\r2,b\r", S2C, {}, [["1", "a", None], ["2", "b", None]]),
    ("nonml_ws_ctrl", "1,a\n\x00\x1f \n2,b\n", S2C, {}, [["1", "a", None], ["2", "b", None]]),
    ("nonml_nul_quote", "\x00a,b\x00,c\n", S2C, {"quote": ""}, [["a,b", "c", None]]),
    ("trail_ws_start", "  ,x\n", S2C, {"ignore_trailing_white_space": True}, ("error", "syntax")),
]

# (type, token, options, value or BAD): the value Spark reads from one token
VALUES: list[tuple[str, str, dict[str, Any], Any]] = [
    ("INT", " 1", {}, "BAD"),
    ("INT", "1 ", {}, "BAD"),
    ("INT", "+1", {}, 1),
    ("INT", "-0", {}, 0),
    ("INT", "007", {}, 7),
    ("INT", "1.0", {}, "BAD"),
    ("INT", "2147483647", {}, 2147483647),
    ("INT", "2147483648", {}, "BAD"),
    ("INT", "0x10", {}, "BAD"),
    ("INT", "\uff11\uff12", {}, 12),
    ("INT", "1e2", {}, "BAD"),
    ("INT", "\u0661", {}, 1),
    ("TINYINT", "127", {}, 127),
    ("TINYINT", "128", {}, "BAD"),
    ("TINYINT", "-128", {}, -128),
    ("SMALLINT", "32767", {}, 32767),
    ("SMALLINT", "32768", {}, "BAD"),
    ("BIGINT", "9223372036854775807", {}, 9223372036854775807),
    ("BIGINT", "9223372036854775808", {}, "BAD"),
    ("DOUBLE", "NaN", {}, "NaN"),
    ("FLOAT", "NaN", {}, "NaN"),
    ("DOUBLE", "Inf", {}, "Inf"),
    ("FLOAT", "Inf", {}, "Inf"),
    ("DOUBLE", "-Inf", {}, "-Inf"),
    ("FLOAT", "-Inf", {}, "-Inf"),
    ("DOUBLE", "Infinity", {}, "Inf"),
    ("FLOAT", "Infinity", {}, "Inf"),
    ("DOUBLE", "-Infinity", {}, "-Inf"),
    ("FLOAT", "-Infinity", {}, "-Inf"),
    ("DOUBLE", "+Inf", {}, "BAD"),
    ("FLOAT", "+Inf", {}, "BAD"),
    ("DOUBLE", "nan", {}, "BAD"),
    ("FLOAT", "nan", {}, "BAD"),
    ("DOUBLE", "inf", {}, "BAD"),
    ("FLOAT", "inf", {}, "BAD"),
    ("DOUBLE", "+Infinity", {}, "Inf"),
    ("FLOAT", "+Infinity", {}, "Inf"),
    ("DOUBLE", "1e3", {}, 1000.0),
    ("FLOAT", "1e3", {}, 1000.0),
    ("DOUBLE", " 1.5 ", {}, 1.5),
    ("FLOAT", " 1.5 ", {}, 1.5),
    ("DOUBLE", "1.5d", {}, 1.5),
    ("FLOAT", "1.5d", {}, 1.5),
    ("DOUBLE", "1.5f", {}, 1.5),
    ("FLOAT", "1.5f", {}, 1.5),
    ("DOUBLE", "0x1p3", {}, 8.0),
    ("FLOAT", "0x1p3", {}, 8.0),
    ("DOUBLE", ".5", {}, 0.5),
    ("FLOAT", ".5", {}, 0.5),
    ("DOUBLE", "5.", {}, 5.0),
    ("FLOAT", "5.", {}, 5.0),
    ("DOUBLE", "-0", {}, -0.0),
    ("FLOAT", "-0", {}, -0.0),
    ("DOUBLE", "1e400", {}, "Inf"),
    ("FLOAT", "1e400", {}, "Inf"),
    ("DOUBLE", "1e-400", {}, 0.0),
    ("FLOAT", "1e-400", {}, 0.0),
    ("DOUBLE", "+NaN", {}, "NaN"),
    ("FLOAT", "+NaN", {}, "NaN"),
    ("DOUBLE", "\t2\t", {}, 2.0),
    ("FLOAT", "\t2\t", {}, 2.0),
    ("DOUBLE", "\uff11", {}, "BAD"),
    ("FLOAT", "\uff11", {}, "BAD"),
    ("FLOAT", "3.5e38", {}, "Inf"),
    ("FLOAT", "1e39", {}, "Inf"),
    ("DOUBLE", "n", {"nan_value": "n", "positive_inf": "pinf", "negative_inf": "ninf"}, "NaN"),
    ("DOUBLE", "pinf", {"nan_value": "n", "positive_inf": "pinf", "negative_inf": "ninf"}, "Inf"),
    ("DOUBLE", "ninf", {"nan_value": "n", "positive_inf": "pinf", "negative_inf": "ninf"}, "-Inf"),
    ("DOUBLE", "NaN", {"nan_value": "n", "positive_inf": "pinf", "negative_inf": "ninf"}, "NaN"),
    ("DOUBLE", "Inf", {"nan_value": "n", "positive_inf": "pinf", "negative_inf": "ninf"}, "BAD"),
    ("DOUBLE", "-Inf", {"nan_value": "n", "positive_inf": "pinf", "negative_inf": "ninf"}, "BAD"),
    (
        "DOUBLE",
        "Infinity",
        {"nan_value": "n", "positive_inf": "pinf", "negative_inf": "ninf"},
        "Inf",
    ),
    ("FLOAT", "n", {"nan_value": "n", "positive_inf": "pinf", "negative_inf": "ninf"}, "NaN"),
    ("FLOAT", "pinf", {"nan_value": "n", "positive_inf": "pinf", "negative_inf": "ninf"}, "Inf"),
    ("FLOAT", "ninf", {"nan_value": "n", "positive_inf": "pinf", "negative_inf": "ninf"}, "-Inf"),
    ("FLOAT", "NaN", {"nan_value": "n", "positive_inf": "pinf", "negative_inf": "ninf"}, "NaN"),
    ("FLOAT", "Inf", {"nan_value": "n", "positive_inf": "pinf", "negative_inf": "ninf"}, "BAD"),
    ("DOUBLE", "NaN", {}, "NaN"),
    ("DOUBLE", "Inf", {}, "Inf"),
    ("DECIMAL(5,2)", "1.005", {}, "D1.01"),
    ("DECIMAL(5,2)", "1.004", {}, "D1.00"),
    ("DECIMAL(5,2)", "-1.005", {}, "D-1.01"),
    ("DECIMAL(5,2)", "123.456", {}, "D123.46"),
    ("DECIMAL(5,2)", "1234.5", {}, "BAD"),
    ("DECIMAL(5,2)", "999.995", {}, "BAD"),
    ("DECIMAL(5,2)", "1,234.5", {}, "BAD"),
    ("DECIMAL(5,2)", " 1.5", {}, "BAD"),
    ("DECIMAL(5,2)", "1e2", {}, "D100.00"),
    ("DECIMAL(5,2)", ".5", {}, "D0.50"),
    ("DECIMAL(5,2)", "+1.5", {}, "D1.50"),
    ("DECIMAL(5,2)", "1.5e-3", {}, "D0.00"),
    ("DECIMAL(5,2)", "abc", {}, "BAD"),
    ("DECIMAL(5,2)", "1_0", {}, "BAD"),
    ("DECIMAL(5,2)", "0.000", {}, "D0.00"),
    ("DECIMAL(5,2)", "12,34", {}, "BAD"),
    ("DECIMAL(10,2)", "1,234.5", {}, "D1234.50"),
    ("DECIMAL(10,2)", "-99999999.999", {}, "BAD"),
    ("DECIMAL", "12345678901", {}, "BAD"),
    ("DECIMAL", "1.5", {}, "D2"),
    ("BOOLEAN", "true", {}, True),
    ("BOOLEAN", "TRUE", {}, True),
    ("BOOLEAN", "True", {}, True),
    ("BOOLEAN", "false", {}, False),
    ("BOOLEAN", "FaLsE", {}, False),
    ("BOOLEAN", "1", {}, "BAD"),
    ("BOOLEAN", "0", {}, "BAD"),
    ("BOOLEAN", "yes", {}, "BAD"),
    ("BOOLEAN", " true", {}, "BAD"),
    ("BOOLEAN", "true ", {}, "BAD"),
    ("BOOLEAN", "t", {}, "BAD"),
    ("DOUBLE", "3.4028235677973366e38", {}, 3.4028235677973366e38),
    ("FLOAT", "3.4028235677973366e38", {}, 3.4028234663852886e38),
    ("DOUBLE", "1e-46", {}, 1e-46),
    ("FLOAT", "1e-46", {}, 0.0),
    ("DOUBLE", "7e-46", {}, 7e-46),
    ("FLOAT", "7e-46", {}, 0.0),
    ("DECIMAL(5,0)", "2.5", {}, "D3"),
    ("DECIMAL(5,0)", "-2.5", {}, "D-3"),
    ("DECIMAL(5,0)", "99999.5", {}, "BAD"),
    ("BIGINT", "-9223372036854775808", {}, -9223372036854775808),
    ("BOOLEAN", "fal\u017fe", {}, False),
]


# -- tests -----------------------------------------------------------------------------------
@pytest.mark.parametrize(("options", "line", "expected"), TOKENS)
def test_a_line_is_tokenised_as_spark_does(
    options: dict[str, Any], line: str, expected: Any
) -> None:
    csv = SparkCsvOptions(empty_value="<E>", **options)
    if expected == "ERROR":
        with pytest.raises(CsvSyntaxError):
            list(records(line, csv))
        return
    [(tokens, number, _)] = list(records(line, csv))
    assert tokens == expected
    assert number == 1


@pytest.mark.parametrize(("options", "text", "expected"), STREAM)
def test_a_stream_is_tokenised_as_spark_does(
    options: dict[str, Any], text: str, expected: Any
) -> None:
    csv = SparkCsvOptions(empty_value="<E>", multi_line=True, **options)
    if expected == "ERROR":
        with pytest.raises(CsvSyntaxError):
            list(records(text, csv))
        return
    assert [[tokens, raw] for tokens, _, raw in records(text, csv)] == expected


@pytest.mark.parametrize(
    ("text", "ddl", "options", "expected"),
    [case[1:] for case in READS],
    ids=[case[0] for case in READS],
)
def test_a_file_reads_as_spark_reads_it(
    text: str, ddl: str, options: dict[str, Any], expected: Any
) -> None:
    reader = {key: options[key] for key in READER_OPTIONS if key in options}
    csv = SparkCsvOptions(**{k: v for k, v in options.items() if k not in READER_OPTIONS})
    if isinstance(expected, tuple):
        kind = {"syntax": CsvSyntaxError, "malformed": RuntimeError, "header": ValueError}
        with pytest.raises(kind[expected[1]]):
            _read(text, ddl, csv, **reader)
        return
    assert _read(text, ddl, csv, **reader) == expected


@pytest.mark.parametrize(("dtype", "token", "options", "expected"), VALUES)
def test_a_value_converts_as_spark_converts_it(
    dtype: str, token: str, options: dict[str, Any], expected: Any
) -> None:
    schema = parse_ddl(f"a {dtype}")
    values, reason = convert([token], schema, SparkCsvOptions(**options), _iso)
    if expected == BAD:
        assert values == {"a": None}
        assert reason is not None and "column a" in reason
    else:
        assert reason is None
        assert _plain(values["a"]) == expected


def test_records_number_lines_from_first_line() -> None:
    """Line numbers are this module's (Spark reports none); a byte order mark is dropped at
    line 1 only (Spark: the first line of a file)."""
    text = '\ufeffa,b\n\n  \nc,d\r\ne\rf,"g\nh"\n'
    found = [(tokens, line) for tokens, line, _ in records(text, SparkCsvOptions(), first_line=1)]
    assert found == [(["a", "b"], 1), (["c", "d"], 4), (["e"], 5), (["f", "g"], 6), (['h"'], 7)]
    later = list(records("\ufeffa\n", SparkCsvOptions(), first_line=9))
    assert later == [(["\ufeffa"], 9, "\ufeffa")]
    stream = SparkCsvOptions(multi_line=True)
    found = [(tokens, line) for tokens, line, _ in records(text, stream)]
    assert found == [(["a", "b"], 1), (["  "], 3), (["c", "d\r"], 4), (["e\rf", "g\nh"], 5)]


def test_convert_reports_why_a_record_is_malformed() -> None:
    schema = parse_ddl("a INT, b DOUBLE")
    options = SparkCsvOptions()
    assert convert(["1", "2.5"], schema, options, _iso) == ({"a": 1, "b": 2.5}, None)
    values, reason = convert(["x"], schema, options, _iso)
    assert values == {"a": None, "b": None}
    assert reason == "the record has 1 value(s), the schema 2 column(s)"
    values, reason = convert(["1", "y"], schema, options, _iso)
    assert values == {"a": 1, "b": None}
    assert reason is not None and reason.startswith("column b: 'y' is not a number")
    with pytest.raises(TypeError, match="no columns of type"):
        convert(["1"], parse_ddl("a ARRAY<INT>"), options, _iso)
    assert convert(["\u00e9"], parse_ddl("a BINARY"), options, _iso) == ({"a": b"\xc3\xa9"}, None)


def test_dates_and_timestamps_are_read_by_the_given_parser() -> None:
    """Not Spark's datetime rules: the ISO-only stand-in shows the delegation."""
    schema = parse_ddl("d DATE, t TIMESTAMP")
    values, reason = convert(["2024-01-05", "2024-01-05T10:00:00"], schema, SparkCsvOptions(), _iso)
    assert values == {"d": datetime.date(2024, 1, 5), "t": datetime.datetime(2024, 1, 5, 10)}
    assert reason is None
    values, reason = convert(["2024-1-5", "NA"], schema, SparkCsvOptions(null_value="NA"), _iso)
    assert values == {"d": None, "t": None}
    assert reason is not None and reason.startswith("column d:")


def test_header_problem_is_sparks_message() -> None:
    """The first lines of Spark's messages (IllegalArgumentException with enforceSchema=false)."""
    schema = parse_ddl("a INT, b INT")
    options = SparkCsvOptions(null_value="a")
    assert header_problem(["A", "b"], schema, options) is None
    assert header_problem([None, "b"], schema, options) is None
    assert header_problem(["A", "b"], schema, options, case_sensitive=True) is not None
    mismatch = header_problem(["x", "y"], schema, options)
    assert mismatch is not None
    assert mismatch.startswith("CSV header does not conform to the schema.")
    assert "Expected: a but found: x" in mismatch
    count = header_problem(["a", "b", "c"], schema, options)
    assert count is not None
    assert count.startswith("Number of column in CSV header is not equal to number of fields")


@pytest.mark.parametrize(
    "options",
    [
        {"sep": ""},
        {"quote": "ab"},
        {"escape": "ab"},
        {"comment": "ab"},
        {"line_sep": ""},
        {"line_sep": "abc"},
        {"unescaped_quote_handling": "STOP"},
        {"max_columns": 0},
        {"max_chars_per_column": -2},
    ],
)
def test_options_are_checked(options: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        SparkCsvOptions(**options)


@pytest.mark.parametrize(
    ("options", "ok"),
    [
        ({}, True),
        ({"escape": '"'}, True),
        ({"quote": "", "escape": ""}, True),
        ({"sep": "\t", "comment": "#", "unescaped_quote_handling": "RAISE_ERROR"}, True),
        ({"escape": ""}, False),  # Spark reads a closing "" as "
        ({"sep": "||"}, False),
        ({"multi_line": True}, False),
        ({"line_sep": "\n"}, False),
        ({"ignore_leading_white_space": True}, False),
        ({"ignore_trailing_white_space": True}, False),
        ({"null_value": "NA", "empty_value": "-"}, True),  # the caller applies them
        ({"sep": "\u00a7"}, False),  # pyarrow's separator is one byte
        ({"quote": "\u00ab"}, False),
        ({"sep": "\0", "quote": ""}, False),
        ({"char_to_escape_quote_escaping": "#"}, False),
        ({"max_chars_per_column": 100}, False),
    ],
)
def test_arrow_fast_path_ok(options: dict[str, Any], ok: bool) -> None:
    assert arrow_fast_path_ok(SparkCsvOptions(**options)) is ok


def _well_formed_line(rnd: random.Random, options: SparkCsvOptions) -> str:
    """A line as arrow_fast_path_ok requires: each quoted field closed right before the
    separator, with no quote (but doubled ones when the escape is the quote) nor escape."""
    quote, sep = options.quote or "\0", options.sep
    inside = ["a", " ", ",", "\t", "x", "\x01", "'", '"', "\\"]
    inside = [c for c in inside if c not in (quote, options.escape, sep)]
    fields = []
    for _ in range(rnd.randint(1, 4)):
        text = "".join(rnd.choices([*inside, quote * 2 if options.escape == quote else ""], k=4))
        if options.quote and rnd.random() < 0.5:
            fields.append(quote + text + quote)
        else:  # unquoted: quotes and escapes are plain text after the first character
            fields.append(rnd.choice(inside) + text.replace(sep, "") if text else "")
    return sep.join(fields)


@pytest.mark.parametrize(
    "options",
    [{}, {"escape": '"'}, {"quote": "'"}, {"quote": "", "escape": ""}, {"sep": "\t"}],
    ids=["default", "rfc", "single", "unquoted", "tabs"],
)
def test_pyarrow_reads_well_formed_lines_as_spark(options: dict[str, Any]) -> None:
    """pyarrow against this module (itself checked against Spark above)."""
    csv = SparkCsvOptions(**options)
    rnd = random.Random(7)
    checked = 0
    for _ in range(600):
        line = _well_formed_line(rnd, csv)
        if all(char <= " " for char in line):
            continue
        [(tokens, _, _)] = list(records(line, csv))
        names = [f"c{i}" for i in range(len(tokens))]
        try:
            table = pacsv.read_csv(
                pa.BufferReader((line + "\n").encode()),
                read_options=pacsv.ReadOptions(column_names=names),
                parse_options=arrow_parse_options(csv),
                convert_options=pacsv.ConvertOptions(
                    column_types=dict.fromkeys(names, pa.string()),
                    null_values=[""],
                    strings_can_be_null=True,
                    quoted_strings_can_be_null=False,
                ),
            )
        except pa.ArrowInvalid:
            continue
        assert table.to_pylist() == [dict(zip(names, tokens, strict=True))]
        checked += 1
    assert checked > 300
