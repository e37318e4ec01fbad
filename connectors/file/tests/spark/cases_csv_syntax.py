"""More CSV reader cases for ``record_spark_readers.py`` (see ``reader_cases.py``): the
tokenizer's options (quote, escape, charToEscapeQuoteEscaping, comment, the five
unescapedQuoteHandling values, multiLine, lineSep, separators), records with too few or too
many values in each parse mode, the header with enforceSchema, and value rules (booleans,
integers with spaces, decimal rounding, FLOAT overflow)."""

from __future__ import annotations

from reader_cases import ReaderCase


def _csv(name: str, schema: str, text: str, note: str, **options: str) -> ReaderCase:
    return ReaderCase(
        name=name, format="csv", input=text, schema=schema, options=options, note=note
    )


_UNESCAPED = '1,a"b\n2,"a"b"\n3,"a,b"c\n4,x\n'
"""An unescaped quote inside an unquoted value, inside a quoted one, and after a closing
quote, then a plain record."""

_FEW_MANY = "1,2\n3\n4,5,6\n7,8\n"
"""Too few values, then too many."""

CSV_SYNTAX: list[ReaderCase] = [
    _csv(
        "csv_quote_escape_default",
        "s STRING, i INT",
        '"a\\"b",1\n"a""b",2\n"a\\\\",3\n"a\\b",4\n"\\"",5\n',
        "default escape (backslash): an escaped quote, a doubled quote, an escaped "
        "backslash before the closing quote, a backslash before another character",
    ),
    _csv(
        "csv_escape_is_quote",
        "s STRING, i INT",
        '"a""b",1\n"""",2\n"a\\"b",3\n"",4\n',
        "escape set to the quote: doubled quotes (RFC 4180) and a backslash",
        escape='"',
    ),
    _csv(
        "csv_char_to_escape_quote_escaping",
        "s STRING, i INT",
        '"a#\\",1\n"a\\\\",2\n"a\\"b",3\n',
        "charToEscapeQuoteEscaping #: what escapes the escape character",
        charToEscapeQuoteEscaping="#",
    ),
    _csv(
        "csv_quote_off",
        "s STRING, t BINARY, u STRING",
        '"a,b",c\n\'x\',"y"\n',
        "quote set to empty: quoting is off, quotes are text; a BINARY column",
        quote="",
    ),
    _csv(
        "csv_comment_lines",
        "s STRING, i INT",
        "#first,1\na,2\n #not a comment,3\nb#c,4\n#last\n",
        "comment #: lines starting with it are skipped, others keep the character",
        comment="#",
    ),
    _csv(
        "csv_unescaped_quote_stop_at_delimiter",
        "i INT, s STRING, _corrupt_record STRING",
        _UNESCAPED,
        "unescapedQuoteHandling default (STOP_AT_DELIMITER)",
    ),
    _csv(
        "csv_unescaped_quote_back_to_delimiter",
        "i INT, s STRING, _corrupt_record STRING",
        _UNESCAPED,
        "unescapedQuoteHandling BACK_TO_DELIMITER",
        unescapedQuoteHandling="BACK_TO_DELIMITER",
    ),
    _csv(
        "csv_unescaped_quote_stop_at_closing_quote",
        "i INT, s STRING, _corrupt_record STRING",
        _UNESCAPED,
        "unescapedQuoteHandling STOP_AT_CLOSING_QUOTE",
        unescapedQuoteHandling="STOP_AT_CLOSING_QUOTE",
    ),
    _csv(
        "csv_unescaped_quote_skip_value",
        "i INT, s STRING, _corrupt_record STRING",
        _UNESCAPED,
        "unescapedQuoteHandling SKIP_VALUE",
        unescapedQuoteHandling="SKIP_VALUE",
    ),
    _csv(
        "csv_unescaped_quote_raise_error",
        "i INT, s STRING",
        _UNESCAPED,
        "unescapedQuoteHandling RAISE_ERROR: the read fails, whatever the mode",
        unescapedQuoteHandling="RAISE_ERROR",
        mode="DROPMALFORMED",
    ),
    _csv(
        "csv_multiline_quoted_line_breaks",
        "i INT, s STRING, _corrupt_record STRING",
        '1,"a\nb"\r\n2,"c\r\nd"\r\n3\r\n4,"e,""f""\ng"\n',
        "multiLine: quoted values holding line breaks (LF and CRLF), a short record",
        multiLine="true",
    ),
    _csv(
        "csv_line_sep_semicolon",
        "i INT, s STRING, _corrupt_record STRING",
        "1,a;2,b\n3;4,c;",
        "lineSep ;: records end at ; only, a line feed is text",
        lineSep=";",
    ),
    ReaderCase(
        name="csv_sep_tab_escape_and_invalid_utf8",
        format="csv",
        input="x\ty\tz\n1\t\t3\n\xff\tb\xc3\t\xe2\x82\n",
        schema="a STRING, b STRING, c STRING",
        options={"sep": "\\t"},
        note="sep given as backslash-t (two characters) is a tab; bytes that are not UTF-8",
        raw_bytes=True,
    ),
    _csv(
        "csv_sep_multi_character",
        "a STRING, b INT, _corrupt_record STRING",
        "x||1\ny|z||2\n||3||4\n",
        "a separator of two characters",
        sep="||",
    ),
    _csv(
        "csv_columns_few_many_permissive",
        "a INT, b INT, _corrupt_record STRING",
        _FEW_MANY,
        "too few and too many values, PERMISSIVE with a corrupt record column",
    ),
    _csv(
        "csv_columns_few_many_dropmalformed",
        "a INT, b INT",
        _FEW_MANY,
        "too few and too many values, DROPMALFORMED",
        mode="DROPMALFORMED",
    ),
    _csv(
        "csv_columns_few_many_failfast",
        "a INT, b INT",
        _FEW_MANY,
        "too few values, FAILFAST",
        mode="FAILFAST",
    ),
    _csv(
        "csv_header_enforce_schema_false_case",
        "A INT, b STRING",
        "\n#note\na,B\n1,x\n",
        "header with enforceSchema false: names match regardless of case; blank and "
        "comment lines before the header",
        header="true",
        enforceSchema="false",
        comment="#",
    ),
    _csv(
        "csv_header_enforce_schema_false_mismatch",
        "a INT, b STRING",
        "a,c\n1,x\n",
        "header with enforceSchema false: a name that does not match fails the read",
        header="true",
        enforceSchema="false",
    ),
    _csv(
        "csv_header_enforce_schema_true_mismatch",
        "a INT, b STRING",
        "x,y,z\n1,p\n2,q\n",
        "header with enforceSchema true (default): columns by position whatever the header",
        header="true",
    ),
    _csv(
        "csv_booleans",
        "b BOOLEAN, _corrupt_record STRING",
        "true\nFALSE\ntRuE\n1\n0\nyes\n true\n",
        "booleans: any letter case; 1, 0, yes and spaces are malformed",
    ),
    _csv(
        "csv_ints_with_spaces",
        "i INT, _corrupt_record STRING",
        ' 1\n2 \n+3\n-0\n007\n1.0\n2147483648\n0x10\n" 4"\n',
        "integers: spaces around, signs, leading zeros, fractions, overflow, hexadecimal",
    ),
    _csv(
        "csv_decimal_rounding",
        "d DECIMAL(5,2), _corrupt_record STRING",
        '1.005\n-1.005\n1.004\n123.456\n999.995\n"1,234.5"\n1e2\n.5\n',
        "decimals: rounding half up, precision overflow after rounding, commas, exponents",
    ),
    _csv(
        "csv_float_overflow",
        "f FLOAT, d DOUBLE",
        "3.5e38,3.5e38\n1e39,1e309\n-1e39,-1e309\n1e-46,1e-400\n1.5d,1.5f\n 2.5 , 2.5 \n",
        "FLOAT and DOUBLE out of range are infinity; suffixes and spaces around",
    ),
    _csv(
        "csv_max_columns",
        "a STRING, b STRING",
        "1,2\n3,4,5\n",
        "maxColumns 2: a record with more values fails the read",
        maxColumns="2",
    ),
]
"""Cases of the CSV reader's syntax and value options."""
