"""Small JSON and CSV inputs read by PySpark in ``record_spark_readers.py``.

Each case is one file's exact text, a Spark DDL schema and Spark reader options, focused on one
option or edge: datetime parsing (``timestampFormat``, ``dateFormat``, ``timestampNTZFormat``,
``timeZone``), CSV value options (``nullValue``, ``emptyValue``, ``nanValue``, ``positiveInf``,
``negativeInf``, white space) and the three parse modes. Only the standard library is used, so
the tests import this module to pair each case with its recording in ``recorded/<name>.json``.
CSV cases have no header line unless their options set ``header``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

__all__ = ["CASES", "ReaderCase", "case_by_name", "case_bytes"]


@dataclass(frozen=True, kw_only=True)
class ReaderCase:
    """One file read with ``spark.read.format(format).schema(schema).options(**options)``."""

    name: str
    format: Literal["json", "csv"]
    input: str
    schema: str
    options: dict[str, str] = field(default_factory=dict)
    note: str = ""
    raw_bytes: bool = False
    """``input`` holds one character per byte of the file (code points 0-255), for files that
    are not UTF-8; else it is the file's text, written as UTF-8."""

    def to_dict(self) -> dict[str, Any]:
        """The case as plain JSON-able data (``raw_bytes`` only when set)."""
        data = asdict(self)
        if not self.raw_bytes:
            del data["raw_bytes"]
        return data

    def data(self) -> bytes:
        """The file's bytes."""
        return case_bytes(self.to_dict())


def case_bytes(case: dict[str, Any]) -> bytes:
    """The bytes of the file of a case (or of a recording, which holds its case)."""
    return str(case["input"]).encode("latin-1" if case.get("raw_bytes") else "utf-8")


def _lines(*lines: str) -> str:
    """The text of a file: each line ended by ``\\n``."""
    return "".join(f"{line}\n" for line in lines)


def _json(name: str, schema: str, *lines: str, note: str = "", **options: str) -> ReaderCase:
    return ReaderCase(
        name=name, format="json", input=_lines(*lines), schema=schema, options=options, note=note
    )


def _csv(name: str, schema: str, *lines: str, note: str = "", **options: str) -> ReaderCase:
    return ReaderCase(
        name=name, format="csv", input=_lines(*lines), schema=schema, options=options, note=note
    )


_TS_NY = ("2024-01-15T12:00:00", "2024-07-15T12:00:00", "2024-03-10T02:30:00")
"""Winter, summer and a local time in New York's spring-forward gap."""

_TS_NY_MORE = ("2024-11-03T01:30:00", "2024-01-15T12:00:00Z")
"""An ambiguous New York local time, and a value with its own zone."""

# -- datetime parsing: JSON -------------------------------------------------------------------
JSON_DATETIME = [
    _json(
        "json_ts_default_t_and_space",
        "ts TIMESTAMP",
        '{"ts": "2024-03-01T12:34:56"}',
        '{"ts": "2024-03-01 12:34:56"}',
        '{"ts": "2024-03-01T12:34"}',
        '{"ts": "2024-03-01T12"}',
        '{"ts": "2024-03-01T"}',
        note="default parser: 'T' or space between date and time, shorter times",
    ),
    _json(
        "json_ts_default_offsets",
        "ts TIMESTAMP",
        '{"ts": "2024-03-01T12:00:00Z"}',
        '{"ts": "2024-03-01T12:00:00+02:00"}',
        '{"ts": "2024-03-01T12:00:00-0530"}',
        '{"ts": "2024-03-01T12:00:00+01"}',
        '{"ts": "2024-03-01T12:00:00 UTC"}',
        '{"ts": "2024-03-01T12:00:00Europe/Paris"}',
        note="default parser: zone offsets and ids after the time",
    ),
    _json(
        "json_ts_default_fraction_digits",
        "ts TIMESTAMP",
        '{"ts": "2024-03-01T12:00:00.1"}',
        '{"ts": "2024-03-01T12:00:00.123"}',
        '{"ts": "2024-03-01T12:00:00.123456"}',
        '{"ts": "2024-03-01T12:00:00.1234567"}',
        '{"ts": "2024-03-01T12:00:00.123456789Z"}',
        '{"ts": "2024-03-01T12:00:00."}',
        note="default parser: 1 to 9 fraction digits (microsecond precision)",
    ),
    _json(
        "json_ts_default_date_only",
        "ts TIMESTAMP",
        '{"ts": "2024-03-01"}',
        '{"ts": "2024-03"}',
        '{"ts": "2024"}',
        '{"ts": "2024-3-1"}',
        note="default parser: a date without time into a TIMESTAMP column",
    ),
    _json(
        "json_ts_default_surrounding_spaces",
        "ts TIMESTAMP",
        '{"ts": " 2024-03-01T12:00:00"}',
        '{"ts": "2024-03-01T12:00:00 "}',
        '{"ts": "  2024-03-01 12:00:00  "}',
        '{"ts": "\\t2024-03-01T12:00:00\\n"}',
        note="default parser: white space around the value",
    ),
    _json(
        "json_ts_default_invalid",
        "id INT, ts TIMESTAMP",
        '{"id": 1, "ts": "2024-13-01T00:00:00"}',
        '{"id": 2, "ts": "2024-02-30T00:00:00"}',
        '{"id": 3, "ts": "2024-03-01T24:00:00"}',
        '{"id": 4, "ts": "not a time"}',
        '{"id": 5, "ts": ""}',
        '{"id": 6, "ts": 1709294400}',
        note="default parser, PERMISSIVE without a corrupt-record column: invalid values",
    ),
    _json(
        "json_date_default",
        "d DATE",
        '{"d": "2024-03-01"}',
        '{"d": "2024-3-1"}',
        '{"d": "2024-03-01T12:34:56"}',
        '{"d": "2024-03-01 junk"}',
        '{"d": " 2024-03-01 "}',
        '{"d": "20240301"}',
        note="default date parser: what it accepts after the date",
    ),
    _json(
        "json_ts_format_dd_mm_yyyy",
        "ts TIMESTAMP",
        '{"ts": "01/03/2024 12:34:56"}',
        '{"ts": "1/3/2024 12:34:56"}',
        '{"ts": "01/03/2024 12:34"}',
        '{"ts": "2024-03-01T12:34:56"}',
        timestampFormat="dd/MM/yyyy HH:mm:ss",
        note="custom timestampFormat: matching, single digits, shorter, and an ISO value",
    ),
    _json(
        "json_ts_format_iso_millis_offset",
        "ts TIMESTAMP",
        '{"ts": "2024-03-01T12:34:56.789+02:00"}',
        '{"ts": "2024-03-01T12:34:56.789Z"}',
        '{"ts": "2024-03-01T12:34:56.7+02:00"}',
        '{"ts": "2024-03-01T12:34:56+02:00"}',
        '{"ts": "2024-03-01T12:34:56.789123+02:00"}',
        timestampFormat="yyyy-MM-dd'T'HH:mm:ss.SSSXXX",
        note="custom timestampFormat with SSS and XXX: fewer or more digits, no fraction",
    ),
    _json(
        "json_ts_format_space_millis",
        "ts TIMESTAMP",
        '{"ts": "2024-03-01 12:34:56.789"}',
        '{"ts": "2024-03-01 12:34:56.78"}',
        '{"ts": "2024-03-01 12:34:56"}',
        '{"ts": "2024-03-01T12:34:56.789"}',
        timestampFormat="yyyy-MM-dd HH:mm:ss.SSS",
        note="custom timestampFormat with millis: shorter fraction, none, 'T'",
    ),
    _json(
        "json_ts_format_dotted_minutes",
        "ts TIMESTAMP",
        '{"ts": "01.03.2024 12:34"}',
        '{"ts": "01.03.2024 12:34:56"}',
        '{"ts": "1.3.2024 12:34"}',
        '{"ts": "01.03.2024"}',
        timestampFormat="dd.MM.yyyy HH:mm",
        note="custom timestampFormat without seconds",
    ),
    _json(
        "json_date_format_mm_dd_yyyy",
        "d DATE",
        '{"d": "03/01/2024"}',
        '{"d": "3/1/2024"}',
        '{"d": "2024-03-01"}',
        '{"d": "13/01/2024"}',
        dateFormat="MM/dd/yyyy",
        note="custom dateFormat: matching, single digits, ISO, invalid month",
    ),
    _json(
        "json_date_format_yyyymmdd",
        "d DATE",
        '{"d": "20240301"}',
        '{"d": "2024031"}',
        '{"d": "2024-03-01"}',
        '{"d": "202403011"}',
        dateFormat="yyyyMMdd",
        note="custom compact dateFormat: short, ISO and long values",
    ),
    _json(
        "json_date_format_with_timestamp_column",
        "d DATE, ts TIMESTAMP",
        '{"d": "03/01/2024", "ts": "03/01/2024"}',
        '{"d": "03/01/2024", "ts": "2024-03-01T12:00:00"}',
        dateFormat="MM/dd/yyyy",
        note="dateFormat does not apply to TIMESTAMP columns",
    ),
    _json(
        "json_ts_ntz_default",
        "ts TIMESTAMP_NTZ",
        '{"ts": "2024-03-01T12:34:56"}',
        '{"ts": "2024-03-01 12:34:56.123456789"}',
        '{"ts": "2024-03-01"}',
        '{"ts": "2024-03-01T12:34:56+02:00"}',
        '{"ts": "2024-03-01T12:34:56Z"}',
        note="TIMESTAMP_NTZ with the default parser: with and without zones",
    ),
    _json(
        "json_ts_ntz_format",
        "ts TIMESTAMP_NTZ",
        '{"ts": "01/03/2024 12:34:56"}',
        '{"ts": "2024-03-01T12:34:56"}',
        '{"ts": "01/03/2024"}',
        timestampNTZFormat="dd/MM/yyyy HH:mm:ss",
        note="custom timestampNTZFormat: matching and ISO values",
    ),
    _json(
        "json_ts_ntz_with_timestamp_format_only",
        "ts TIMESTAMP_NTZ, ltz TIMESTAMP",
        '{"ts": "01/03/2024 12:34:56", "ltz": "01/03/2024 12:34:56"}',
        '{"ts": "2024-03-01T12:34:56", "ltz": "2024-03-01T12:34:56"}',
        timestampFormat="dd/MM/yyyy HH:mm:ss",
        note="timestampFormat set, timestampNTZFormat not: which format the NTZ column uses",
    ),
    _json(
        "json_ts_timezone_default",
        "ts TIMESTAMP, ntz TIMESTAMP_NTZ",
        *(f'{{"ts": "{v}", "ntz": "{v}"}}' for v in (*_TS_NY, *_TS_NY_MORE)),
        note="no timeZone option: local times are UTC (the session time zone)",
    ),
    _json(
        "json_ts_timezone_new_york",
        "ts TIMESTAMP, ntz TIMESTAMP_NTZ",
        *(f'{{"ts": "{v}", "ntz": "{v}"}}' for v in (*_TS_NY, *_TS_NY_MORE)),
        timeZone="America/New_York",
        note="timeZone option: local times in New York, DST gap and overlap; NTZ unaffected",
    ),
    _json(
        "json_ts_timezone_new_york_format",
        "ts TIMESTAMP",
        '{"ts": "01/07/2024 12:00:00"}',
        '{"ts": "10/03/2024 02:30:00"}',
        timeZone="America/New_York",
        timestampFormat="dd/MM/yyyy HH:mm:ss",
        note="timeZone option with a custom timestampFormat",
    ),
]

# -- datetime parsing: CSV --------------------------------------------------------------------
CSV_DATETIME = [
    _csv(
        "csv_ts_default_t_and_space",
        "ts TIMESTAMP",
        "2024-03-01T12:34:56",
        "2024-03-01 12:34:56",
        "2024-03-01T12:34",
        "2024-03-01T12",
        note="default parser: 'T' or space between date and time, shorter times",
    ),
    _csv(
        "csv_ts_default_offsets_and_fractions",
        "ts TIMESTAMP",
        "2024-03-01T12:00:00Z",
        "2024-03-01T12:00:00+02:00",
        "2024-03-01T12:00:00.5-05:30",
        "2024-03-01T12:00:00.123456789",
        "2024-03-01T12:00:00.1234567+01:00",
        note="default parser: zone offsets and 1 to 9 fraction digits",
    ),
    _csv(
        "csv_ts_default_date_only_and_spaces",
        "ts TIMESTAMP",
        "2024-03-01",
        " 2024-03-01T12:00:00",
        "2024-03-01T12:00:00 ",
        '" 2024-03-01 12:00:00 "',
        note="default parser: a date alone, white space (unquoted and quoted) around the value",
    ),
    _csv(
        "csv_ts_default_invalid",
        "id INT, ts TIMESTAMP",
        "1,2024-13-01T00:00:00",
        "2,2024-02-30 00:00:00",
        "3,not a time",
        '4,""',
        "5,1709294400",
        note="default parser, PERMISSIVE without a corrupt-record column: invalid values",
    ),
    _csv(
        "csv_date_default",
        "d DATE",
        "2024-03-01",
        "2024-3-1",
        "2024-03-01T12:34:56",
        "2024-03-01 junk",
        "20240301",
        note="default date parser: what it accepts after the date",
    ),
    _csv(
        "csv_ts_format_dd_mm_yyyy",
        "ts TIMESTAMP",
        "01/03/2024 12:34:56",
        "1/3/2024 12:34:56",
        "2024-03-01T12:34:56",
        timestampFormat="dd/MM/yyyy HH:mm:ss",
        note="custom timestampFormat: matching, single digits, and an ISO value",
    ),
    _csv(
        "csv_ts_format_iso_millis_offset",
        "ts TIMESTAMP",
        "2024-03-01T12:34:56.789+02:00",
        "2024-03-01T12:34:56.789Z",
        "2024-03-01T12:34:56+02:00",
        "2024-03-01T12:34:56.789",
        timestampFormat="yyyy-MM-dd'T'HH:mm:ss.SSSXXX",
        note="custom timestampFormat with SSS and XXX: no fraction, no offset",
    ),
    _csv(
        "csv_ts_format_space_millis",
        "ts TIMESTAMP",
        "2024-03-01 12:34:56.789",
        "2024-03-01 12:34:56.7891",
        "2024-03-01 12:34:56",
        timestampFormat="yyyy-MM-dd HH:mm:ss.SSS",
        note="custom timestampFormat with millis: longer fraction, none",
    ),
    _csv(
        "csv_date_format_mm_dd_yyyy",
        "d DATE",
        "03/01/2024",
        "3/1/2024",
        "2024-03-01",
        "02/30/2024",
        dateFormat="MM/dd/yyyy",
        note="custom dateFormat: matching, single digits, ISO, invalid day",
    ),
    _csv(
        "csv_date_format_yyyymmdd",
        "d DATE",
        "20240301",
        "2024-03-01",
        "2024031",
        dateFormat="yyyyMMdd",
        note="custom compact dateFormat: ISO and short values",
    ),
    _csv(
        "csv_ts_ntz_default",
        "ts TIMESTAMP_NTZ",
        "2024-03-01T12:34:56",
        "2024-03-01 12:34:56.1234567",
        "2024-03-01",
        "2024-03-01T12:34:56+02:00",
        note="TIMESTAMP_NTZ with the default parser: with and without zones",
    ),
    _csv(
        "csv_ts_ntz_format",
        "ts TIMESTAMP_NTZ",
        "01/03/2024 12:34:56",
        "2024-03-01T12:34:56",
        timestampNTZFormat="dd/MM/yyyy HH:mm:ss",
        note="custom timestampNTZFormat: matching and ISO values",
    ),
    _csv(
        "csv_ts_ntz_and_timestamp_formats",
        "ntz TIMESTAMP_NTZ, ltz TIMESTAMP",
        "01.03.2024 12:34,2024-03-01 12:34:56.789",
        "2024-03-01 12:34:56.789,01.03.2024 12:34",
        timestampNTZFormat="dd.MM.yyyy HH:mm",
        timestampFormat="yyyy-MM-dd HH:mm:ss.SSS",
        note="both formats set: each column type uses its own",
    ),
    _csv(
        "csv_ts_timezone_new_york",
        "ts TIMESTAMP, ntz TIMESTAMP_NTZ",
        *(f"{v},{v}" for v in (*_TS_NY, *_TS_NY_MORE)),
        timeZone="America/New_York",
        note="timeZone option: local times in New York, DST gap and overlap; NTZ unaffected",
    ),
]

# -- CSV value options ------------------------------------------------------------------------
CSV_VALUES = [
    _csv(
        "csv_null_value_default",
        "s STRING, i INT, d DOUBLE",
        "a,1,1.5",
        ",,",
        "null,null,null",
        "NULL,NULL,NULL",
        note="no nullValue: unquoted empty fields and the word null",
    ),
    _csv(
        "csv_null_value_custom",
        "s STRING, i INT, d DOUBLE",
        "NA,NA,NA",
        '"NA","NA","NA"',
        ",,",
        "na,1,2.5",
        nullValue="NA",
        note="nullValue NA: unquoted, quoted, empty fields, other case",
    ),
    _csv(
        "csv_null_value_with_date_and_timestamp",
        "d DATE, ts TIMESTAMP",
        "-,-",
        "2024-03-01,2024-03-01T12:00:00",
        nullValue="-",
        note="nullValue applies to datetime columns before parsing",
    ),
    _csv(
        "csv_empty_quoted_vs_unquoted",
        "s STRING, i INT, t STRING",
        '"",,x',
        ',"",x',
        '"","",""',
        note="quoted empty string against an empty field, STRING and INT",
    ),
    _csv(
        "csv_empty_value_custom",
        "s STRING, i INT, t STRING",
        '"",,x',
        ",,",
        '"","",""',
        emptyValue="EMPTY",
        note="emptyValue EMPTY: which empty fields it replaces",
    ),
    _csv(
        "csv_empty_value_and_null_value",
        "s STRING, t STRING",
        '"",',
        'NA,""',
        emptyValue="E",
        nullValue="NA",
        note="emptyValue with nullValue set",
    ),
    _csv(
        "csv_nan_inf_default_double",
        "v DOUBLE",
        "NaN",
        "Inf",
        "-Inf",
        "Infinity",
        "-Infinity",
        "+Inf",
        note="default nanValue/positiveInf/negativeInf tokens and Java's spellings",
    ),
    _csv(
        "csv_nan_inf_case_double",
        "v DOUBLE",
        "nan",
        "inf",
        "INF",
        "-inf",
        "NAN",
        "+Infinity",
        note="the default tokens in other letter cases, and +Infinity",
    ),
    _csv(
        "csv_nan_inf_default_float",
        "v FLOAT",
        "NaN",
        "Inf",
        "-Infinity",
        "+Inf",
        "1.1",
        note="FLOAT column: the special tokens, and a value not exact in float32",
    ),
    _csv(
        "csv_nan_value_custom",
        "d DOUBLE, f FLOAT, s STRING",
        "n/a,n/a,n/a",
        "NaN,NaN,NaN",
        "1.5,2.5,x",
        nanValue="n/a",
        note="nanValue n/a: DOUBLE, FLOAT, STRING columns, and the default NaN token",
    ),
    _csv(
        "csv_inf_values_custom",
        "d DOUBLE, f FLOAT",
        "big,small",
        "small,big",
        "Inf,-Inf",
        "Infinity,-Infinity",
        positiveInf="big",
        negativeInf="small",
        note="custom positiveInf/negativeInf, and the default tokens still given",
    ),
    _csv(
        "csv_inf_values_string_and_int_columns",
        "s STRING, i INT, d DOUBLE",
        "Inf,Inf,Inf",
        "NaN,NaN,NaN",
        "-Inf,-Inf,-Inf",
        note="the special tokens in STRING and INT columns",
    ),
    _csv(
        "csv_white_space_default",
        "s STRING, i INT, d DOUBLE",
        " a , 1 , 1.5 ",
        '" b ",2,2.5',
        "c,  3,3.5",
        note="no white-space options: spaces kept in STRING, and in numbers",
    ),
    _csv(
        "csv_ignore_leading_white_space",
        "s STRING, i INT, t STRING",
        "  a,  1,x  ",
        '  "b",2,"  y"',
        ignoreLeadingWhiteSpace="true",
        note="ignoreLeadingWhiteSpace: unquoted and quoted values, STRING and INT",
    ),
    _csv(
        "csv_ignore_trailing_white_space",
        "s STRING, i INT, t STRING",
        "a  ,1  ,  x",
        '"b"  ,2,"y  "',
        ignoreTrailingWhiteSpace="true",
        note="ignoreTrailingWhiteSpace: unquoted and quoted values, STRING and INT",
    ),
    _csv(
        "csv_ignore_both_white_space",
        "s STRING, i INT",
        "  a  ,  1  ",
        '  " b "  ,2',
        "   ,   ",
        ignoreLeadingWhiteSpace="true",
        ignoreTrailingWhiteSpace="true",
        note="both white-space options: spaces inside quotes, a blank field",
    ),
]

# -- parse modes with bad datetime values ---------------------------------------------------
_JSON_BAD_TS = (
    '{"id": 1, "ts": "2024-03-01T12:00:00"}',
    '{"id": 2, "ts": "2024-03-01T25:00:00"}',
    '{"id": 3, "ts": "2024-03-01T13:00:00Z"}',
)
_CSV_BAD_DATE = ("1,2024-03-01", "2,2024-02-30", "3,2024-03-02")

MODES = [
    _json(
        "json_mode_permissive_corrupt_record",
        "id INT, ts TIMESTAMP, _corrupt_record STRING",
        *_JSON_BAD_TS,
        mode="PERMISSIVE",
        note="PERMISSIVE keeps the bad line whole in _corrupt_record",
    ),
    _json(
        "json_mode_dropmalformed",
        "id INT, ts TIMESTAMP",
        *_JSON_BAD_TS,
        mode="DROPMALFORMED",
        note="DROPMALFORMED drops the line with a bad timestamp",
    ),
    _json(
        "json_mode_failfast",
        "id INT, ts TIMESTAMP",
        *_JSON_BAD_TS,
        mode="FAILFAST",
        note="FAILFAST fails the read on a bad timestamp",
    ),
    _json(
        "json_mode_permissive_custom_format",
        "id INT, d DATE, _corrupt_record STRING",
        '{"id": 1, "d": "01/03/2024"}',
        '{"id": 2, "d": "2024-03-01"}',
        dateFormat="dd/MM/yyyy",
        note="PERMISSIVE with a dateFormat the value does not match",
    ),
    _json(
        "json_mode_failfast_ntz_with_zone",
        "id INT, ts TIMESTAMP_NTZ",
        '{"id": 1, "ts": "2024-03-01T12:00:00"}',
        '{"id": 2, "ts": "2024-03-01T12:00:00+02:00"}',
        mode="FAILFAST",
        note="FAILFAST on a TIMESTAMP_NTZ value with a zone offset",
    ),
    _csv(
        "csv_mode_permissive_corrupt_record",
        "id INT, d DATE, _corrupt_record STRING",
        *_CSV_BAD_DATE,
        mode="PERMISSIVE",
        note="PERMISSIVE keeps the bad line whole in _corrupt_record",
    ),
    _csv(
        "csv_mode_dropmalformed",
        "id INT, d DATE",
        *_CSV_BAD_DATE,
        mode="DROPMALFORMED",
        note="DROPMALFORMED drops the line with a bad date",
    ),
    _csv(
        "csv_mode_failfast",
        "id INT, d DATE",
        *_CSV_BAD_DATE,
        mode="FAILFAST",
        note="FAILFAST fails the read on a bad date",
    ),
    _csv(
        "csv_mode_permissive_custom_timestamp_format",
        "id INT, ts TIMESTAMP, _corrupt_record STRING",
        "1,01/03/2024 12:00:00",
        "2,2024-03-01 12:00:00",
        "3,31/02/2024 12:00:00",
        timestampFormat="dd/MM/yyyy HH:mm:ss",
        note="PERMISSIVE with a timestampFormat: ISO and impossible values",
    ),
    _csv(
        "csv_mode_failfast_custom_timestamp_format",
        "id INT, ts TIMESTAMP",
        "1,01/03/2024 12:00:00",
        "2,2024-03-01 12:00:00",
        timestampFormat="dd/MM/yyyy HH:mm:ss",
        mode="FAILFAST",
        note="FAILFAST with a timestampFormat the value does not match",
    ),
]

from cases_csv_syntax import CSV_SYNTAX  # noqa: E402  (they build on ReaderCase above)
from cases_encoding import ENCODING  # noqa: E402
from cases_json_syntax import JSON_SYNTAX  # noqa: E402

CASES: list[ReaderCase] = [
    *JSON_DATETIME,
    *CSV_DATETIME,
    *CSV_VALUES,
    *MODES,
    *JSON_SYNTAX,
    *CSV_SYNTAX,
    *ENCODING,
]
"""Every case, in the order they are recorded."""


def case_by_name(name: str) -> ReaderCase:
    """The case called ``name``; ``KeyError`` names the known ones when there is none."""
    for case in CASES:
        if case.name == name:
            return case
    raise KeyError(f"no reader case {name!r}; known: {', '.join(c.name for c in CASES)}")


_names = [case.name for case in CASES]
if len(_names) != len(set(_names)):
    _repeated = sorted({n for n in _names if _names.count(n) > 1})
    raise ValueError(f"reader case names repeat: {_repeated}")
