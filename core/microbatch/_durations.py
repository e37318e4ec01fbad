"""Durations as Spark users write them: ``"10 seconds"``, ``"500ms"``, ``"7d"``, a timedelta."""

from __future__ import annotations

import re
from datetime import timedelta

__all__ = ["parse_duration"]

_UNITS = {
    "us": 1e-6,
    "microsecond": 1e-6,
    "microseconds": 1e-6,
    "ms": 1e-3,
    "milli": 1e-3,
    "millis": 1e-3,
    "millisecond": 1e-3,
    "milliseconds": 1e-3,
    "s": 1.0,
    "sec": 1.0,
    "secs": 1.0,
    "second": 1.0,
    "seconds": 1.0,
    "m": 60.0,
    "min": 60.0,
    "mins": 60.0,
    "minute": 60.0,
    "minutes": 60.0,
    "h": 3600.0,
    "hour": 3600.0,
    "hours": 3600.0,
    "d": 86400.0,
    "day": 86400.0,
    "days": 86400.0,
    "w": 604800.0,
    "week": 604800.0,
    "weeks": 604800.0,
}
_PART = re.compile(r"\s*(\d+(?:\.\d*)?)\s*([a-zA-Z]*)\s*")


def parse_duration(value: str | int | float | timedelta) -> timedelta:
    """Turn ``value`` into a timedelta.

    Accepts a timedelta, a number of seconds, or a string of one or more ``<number> <unit>``
    parts (``"1 minute 30 seconds"``, ``"interval 2 seconds"``); a bare number in a string is
    seconds. Raises ``ValueError`` with the accepted forms when the value cannot be read, or when
    it is negative.
    """
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, bool):
        raise ValueError(f"expected a duration such as '10 seconds', got {value!r}")
    elif isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        seconds = _parse_text(value)
    else:
        raise ValueError(f"expected a duration such as '10 seconds', got {type(value).__name__}")
    if seconds < 0:
        raise ValueError(f"a duration cannot be negative, got {value!r}")
    return timedelta(seconds=seconds)


def _parse_text(text: str) -> float:
    body = text.strip().lower()
    body = body.removeprefix("interval").strip()
    if not body:
        raise ValueError("expected a duration such as '10 seconds', got an empty string")
    total, position = 0.0, 0
    while position < len(body):
        match = _PART.match(body, position)
        if match is None or match.end() == position:
            break
        number, unit = match.groups()
        factor = _UNITS.get(unit or "s")
        if factor is None:
            raise ValueError(
                f"unknown unit {unit!r} in duration {text!r}; use ms, seconds, minutes, hours "
                "or days, e.g. '10 seconds'"
            )
        total += float(number) * factor
        position = match.end()
    if position != len(body):
        raise ValueError(
            f"cannot read {text!r} as a duration; write it like '10 seconds' or '500ms'"
        )
    return total
