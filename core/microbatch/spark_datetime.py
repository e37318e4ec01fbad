"""Date and timestamp text parsed exactly as Apache Spark 4's JSON and CSV readers do.

:class:`DatetimeParser` backs the Spark-compatible file options ``timestampFormat``,
``timestampNTZFormat``, ``dateFormat`` and ``timeZone`` (``locale`` is en-US only).

Without a pattern, text is read like Spark's ``CAST(text AS TIMESTAMP | TIMESTAMP_NTZ | DATE)``
(surrounding blanks and control characters trimmed; ``yyyy``, ``yyyy-[m]m``,
``yyyy-[m]m-[d]d``, then ``T`` or a space and ``[h]h:[m]m:[s]s.fraction`` and a zone; a time
alone takes today's date), plus the readers' fallback for TIMESTAMP and DATE: the text with
every ``GMT`` removed is tried again, and a DATE read from JSON may be a whole number of days
since 1970-01-01. A TIMESTAMP_NTZ text with a zone or without a date is rejected.

With a pattern, text is read as Spark's datetime patterns read it (java.time's strict,
case-insensitive parser; the whole text must match; missing fields default to 1970-01-01
00:00:00; a text without a zone is in ``time_zone``). A local time in a daylight-saving gap
moves forward by the gap's length; in an overlap the earlier offset wins.

Common shapes are parsed with pyarrow compute: ISO-like text without a pattern and, with a
pattern, numbers separated by literals, month names, AM/PM and numeric offsets. Every other row
is parsed one by one in Python, which is the reference behaviour.

Known differences from Spark: zone names for ``z``/``zzzz`` come from a fixed table of common
English names (Spark uses the JDK's locale data, which maps some abbreviations oddly); region
IDs are those of the system's tz database; the letters ``v`` and ``g`` are rejected.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta
from typing import Literal

import pyarrow as pa
import pyarrow.compute as pc

from ._datetime_calendar import _EPOCH, _INT_MAX, _INT_MIN, _days, _julian_to_gregorian, _spark_zone
from ._datetime_cast import _cast_date, _cast_timestamp
from ._datetime_elements import _Fail, _Item, _State
from ._datetime_pattern import _compile
from ._datetime_resolve import _resolve
from ._datetime_vector import _DEFAULT_PLANS, _I64, _pattern_plan, _Plan, _vector

__all__ = ["DatetimeKind", "DatetimeParser"]

DatetimeKind = Literal["timestamp", "timestamp_ntz", "date"]

_OPTION = {"timestamp": "timestampFormat", "timestamp_ntz": "timestampNTZFormat"}
_TYPES = {"timestamp": pa.timestamp("us", tz="UTC"), "timestamp_ntz": pa.timestamp("us"),
          "date": pa.date32()}  # fmt: skip


_INTEGER = re.compile(r"[+-]?\d+")
_UTC_TEXT = re.compile(
    r"([1-9]\d{3})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d{1,6}))?Z", re.ASCII
)
_MICROSECOND = timedelta(microseconds=1)


class DatetimeParser:
    """Parses date or timestamp text as Apache Spark 4's JSON and CSV readers do.

    ``kind`` is the column's type: ``"timestamp"`` (an instant, returned in UTC),
    ``"timestamp_ntz"`` (a local date-time) or ``"date"``. ``pattern`` is the reader option
    timestampFormat, timestampNTZFormat or dateFormat; None means Spark's default parsing.
    ``time_zone`` is the option timeZone (or Spark's session time zone): any zone ID Spark
    accepts, used for text without a zone. ``reader`` matters only for a DATE without a pattern,
    where Spark's JSON reader also takes a whole number of days since 1970-01-01.

    Raises ValueError for an unknown kind or time zone and for a pattern Spark cannot parse with
    (Spark then fails the query or reads every value as null); the message names the option.
    The text is given as read: a CSV source turns its ``nullValue`` into null first, and an
    empty text is a value that cannot be parsed.
    """

    def __init__(
        self,
        kind: DatetimeKind,
        pattern: str | None = None,
        time_zone: str = "UTC",
        *,
        reader: Literal["csv", "json"] = "csv",
    ) -> None:
        if kind not in _TYPES:
            raise ValueError(f"kind must be 'timestamp', 'timestamp_ntz' or 'date', not {kind!r}")
        if reader not in ("csv", "json"):
            raise ValueError(f"reader must be 'csv' or 'json', not {reader!r}")
        zone = _spark_zone(time_zone)
        if zone is None:
            raise ValueError(
                f"timeZone {time_zone!r} is not a time zone: use a region ID such as "
                "'America/New_York', an offset such as '+01:00', or 'UTC'"
            )
        self.kind, self.pattern, self.time_zone, self.reader = kind, pattern, time_zone, reader
        self._zone = zone
        self._items: list[_Item] | None = None
        self._plan: _Plan | None = _DEFAULT_PLANS[kind]
        if pattern is not None:
            try:
                self._items = _compile(pattern)
            except ValueError as error:
                option = _OPTION.get(kind, "dateFormat")
                raise ValueError(
                    f"{option} {pattern!r} is not a pattern Spark can parse with: {error} "
                    "(see Spark's 'Datetime Patterns for Formatting and Parsing')"
                ) from None
            self._plan = _pattern_plan(self._items)

    def __repr__(self) -> str:
        return (f"DatetimeParser({self.kind!r}, {self.pattern!r}, {self.time_zone!r}, "
                f"reader={self.reader!r})")  # fmt: skip

    def parse(self, values: pa.Array) -> tuple[pa.Array, pa.Array]:
        """Parse a string array.

        Returns the values (``timestamp('us', tz='UTC')``, ``timestamp('us')`` or ``date32``)
        and a boolean array ``bad``, True where a non-null text could not be parsed (its value
        is null). A null text gives null and ``bad`` False.
        """
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)):
            raise TypeError(f"DatetimeParser.parse takes a string array, not {values.type}")
        result = pa.nulls(len(values), _I64)
        if self._plan is not None and len(values):
            result = _vector(self._plan, values, self.kind, self._zone)
        given = pc.is_valid(values)
        rest = pc.and_(given, pc.is_null(result))
        texts = values.filter(rest).to_pylist()
        if texts:
            parsed = pa.array([self._parse_value(text) for text in texts], _I64)
            result = pc.replace_with_mask(result, rest, parsed)
        bad = pc.and_(given, pc.is_null(result))
        if self.kind == "date":
            return result.cast(pa.int32()).cast(pa.date32()), bad
        return result.cast(_TYPES[self.kind]), bad

    def parse_one(self, text: str) -> datetime | date | None:
        """Parse one text; None when it cannot be parsed.

        Raises OverflowError for a value Spark accepts outside Python's years 1 to 9999.
        """
        value = self._parse_value(text)
        if value is None:
            return None
        try:
            if self.kind == "date":
                return date.fromordinal(value + _days(1970, 1, 1) - _days(1, 1, 1) + 1)
            moment = _EPOCH + timedelta(microseconds=value)
        except (OverflowError, ValueError):
            raise OverflowError(f"{text!r} is outside the years 1 to 9999") from None
        return moment.replace(tzinfo=UTC) if self.kind == "timestamp" else moment

    def _parse_value(self, text: str) -> int | None:
        """The reference parse of one text: microseconds or days since the epoch, or None."""
        if not text:  # JSON rejects an empty text; CSV reads it as its nullValue
            return None
        if self._items is not None:
            st = _State()
            pos = 0
            try:
                for item in self._items:
                    pos = item.parse(st, text, pos)
                    if pos < 0:
                        return None
            except _Fail:
                return None
            return _resolve(st, self.kind, self._zone) if pos == len(text) else None
        if self.kind == "timestamp_ntz":
            return _cast_timestamp(text, None)
        if self.kind == "timestamp":
            value = _utc_text_value(text)  # the common case, taken alike by every reading
            if value is not None:
                return value
            value = _cast_timestamp(text, self._zone)
            if value is None:  # the readers' fallback
                value = _cast_timestamp(text.replace("GMT", ""), self._zone)
            return value
        days = _cast_date(text)
        if days is None:
            days = _cast_date(text.replace("GMT", ""))
        if days is None and self.reader == "json" and _INTEGER.fullmatch(text):
            number = int(text)
            days = _julian_to_gregorian(number) if _INT_MIN <= number <= _INT_MAX else None
        return days


def _utc_text_value(text: str) -> int | None:
    """Microseconds since the epoch of ``yyyy-MM-ddTHH:mm:ss[.SSSSSS]Z`` text (a valid date and
    time), which Spark's default parsing reads as that instant whatever the zone; None for any
    other text."""
    found = _UTC_TEXT.fullmatch(text)
    if found is None:
        return None
    year, month, day, hour, minute, second, fraction = found.groups()
    try:
        moment = datetime(
            int(year), int(month), int(day), int(hour), int(minute), int(second),
            int((fraction or "0").ljust(6, "0")),
        )  # fmt: skip
    except ValueError:
        return None
    return (moment - _EPOCH) // _MICROSECOND
