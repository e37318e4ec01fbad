"""The datetime options of the JSON and CSV sources: Spark's ``timestampFormat``,
``timestampNTZFormat``, ``dateFormat``, ``timeZone`` and ``locale``, as parsers by column type.

Parsing follows Spark 4's readers (:mod:`microbatch.spark_datetime`), with one difference on
purpose: a JSON DATE is never read from a number of days since 1970 (Spark reads the string
"19724" as 2024-01-01, and "20240301" as the year 57386).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

import pyarrow as pa

from microbatch.options import Option, Options
from microbatch.spark_datetime import DatetimeKind, DatetimeParser

__all__ = ["DATETIME_OPTIONS", "DatetimeOptions", "datetime_options"]


def _pattern_problem(kind: DatetimeKind) -> Any:
    def check(pattern: str) -> str | None:
        try:
            DatetimeParser(kind, pattern)
        except ValueError as error:
            return str(error)
        return None

    return check


def _zone_problem(zone: str) -> str | None:
    try:
        DatetimeParser("timestamp", None, zone)
    except ValueError as error:
        return str(error)
    return None


def _locale_problem(locale: str) -> str | None:
    if locale.replace("_", "-").lower() in ("en-us", "en"):
        return None
    return "is not supported: month and day names are read in English (en-US) only"


DATETIME_OPTIONS = (
    Option(
        name="timestampFormat",
        validate=_pattern_problem("timestamp"),
        doc="Spark datetime pattern of TIMESTAMP text (e.g. dd/MM/yyyy HH:mm:ss); without it, "
        "text is read as Spark's CAST to TIMESTAMP reads it (ISO 8601 and its shorter forms).",
    ),
    Option(
        name="timestampNTZFormat",
        validate=_pattern_problem("timestamp_ntz"),
        doc="Spark datetime pattern of TIMESTAMP_NTZ text; without it, as Spark's CAST to "
        "TIMESTAMP_NTZ (a text with a zone or offset is malformed).",
    ),
    Option(
        name="dateFormat",
        validate=_pattern_problem("date"),
        doc="Spark datetime pattern of DATE text (e.g. MM/dd/yyyy); without it, as Spark's CAST "
        "to DATE.",
    ),
    Option(
        name="timeZone",
        default="UTC",
        validate=_zone_problem,
        doc="Time zone of TIMESTAMP text without a zone or offset (a region ID such as "
        "America/New_York, or an offset such as +01:00). Default UTC (Spark: the session time "
        "zone).",
    ),
    Option(
        name="locale",
        default="en-US",
        validate=_locale_problem,
        doc="Locale of month and day names in datetime patterns; only en-US.",
    ),
)
"""The datetime options, shared by the JSON and CSV sources."""


_KINDS: dict[pa.DataType, DatetimeKind] = {
    pa.timestamp("us", tz="UTC"): "timestamp",
    pa.timestamp("us"): "timestamp_ntz",
    pa.date32(): "date",
}


@dataclass(frozen=True)
class DatetimeOptions:
    """The datetime options of one source; picklable (parsers are made where they are used)."""

    timestamp_format: str | None = None
    timestamp_ntz_format: str | None = None
    date_format: str | None = None
    time_zone: str = "UTC"
    _parsers: dict[DatetimeKind, DatetimeParser] = field(
        default_factory=dict, compare=False, repr=False
    )

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_parsers"] = {}
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    @staticmethod
    def kind(dtype: pa.DataType) -> DatetimeKind | None:
        """The datetime kind of a column type (None for other types)."""
        return _KINDS.get(dtype)

    def parser(self, dtype: pa.DataType) -> DatetimeParser | None:
        """The parser of a DATE, TIMESTAMP or TIMESTAMP_NTZ column (None for other types)."""
        kind = _KINDS.get(dtype)
        if kind is None:
            return None
        made = self._parsers.get(kind)
        if made is None:
            pattern = {
                "timestamp": self.timestamp_format,
                "timestamp_ntz": self.timestamp_ntz_format,
                "date": self.date_format,
            }[kind]
            made = self._parsers[kind] = DatetimeParser(kind, pattern, self.time_zone)
        return made

    def parse_one(self, dtype: pa.DataType, text: str) -> datetime | date | None:
        """One text of a datetime column as its value; None when it cannot be parsed."""
        parser = self.parser(dtype)
        if parser is None:
            raise TypeError(f"{dtype} is not a date or timestamp type")
        return parser.parse_one(text)


def datetime_options(opts: Options) -> DatetimeOptions:
    """The datetime options of a source's parsed options."""
    return DatetimeOptions(
        timestamp_format=opts["timestampFormat"],
        timestamp_ntz_format=opts["timestampNTZFormat"],
        date_format=opts["dateFormat"],
        time_zone=opts["timeZone"],
    )
