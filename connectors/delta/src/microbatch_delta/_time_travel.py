"""Which version a version number or a time names, with Delta Lake's rules and texts.

A version's time is its commit's (``commitInfo.inCommitTimestamp`` or ``timestamp``, else the
commit file's modification time); versions are searched by bisection, reading one log entry per
step.

- ``startingTimestamp`` (streams): the first version committed at or after the time; a time
  before the earliest version kept gives the earliest; a time after the latest commit is an
  error (DELTA_TIMESTAMP_GREATER_THAN_COMMIT).
- ``timestampAsOf`` (batch reads): the latest version committed at or before the time; a time
  before the earliest version kept, or after the latest commit, is an error.
- ``startingVersion`` / ``versionAsOf``: a version the log holds (VersionNotFound otherwise).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable

from microbatch import SourceError

__all__ = [
    "check_version",
    "format_ms",
    "version_at_or_after",
    "version_at_or_before",
]


def format_ms(ms: int) -> str:
    """``2024-05-01 12:00:00.250`` (UTC) for epoch milliseconds."""
    moment = _dt.datetime.fromtimestamp(ms / 1000, tz=_dt.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{moment.microsecond // 1000:03d}"


def check_version(version: int, versions: list[int], path: str) -> None:
    """Raise Delta's VersionNotFound text when ``version`` is not among ``versions``."""
    if not versions:
        raise SourceError(f"{path} is not a Delta table: it has no commits")
    if version < versions[0] or version > versions[-1]:
        raise SourceError(
            f"Cannot time travel Delta table to version {version}. Available versions: "
            f"[{versions[0]}, {versions[-1]}]. (The Delta table at {path}.)"
        )


def _after_latest(timestamp_ms: int, last_ms: int, path: str) -> SourceError:
    return SourceError(
        f"The provided timestamp ({format_ms(timestamp_ms)}) is after the latest version "
        f"available to this table ({format_ms(last_ms)}). Please use a timestamp before or at "
        f"{format_ms(last_ms)}. (The Delta table at {path}.)"
    )


def version_at_or_after(
    timestamp_ms: int, versions: list[int], time_of: Callable[[int], int], path: str
) -> int:
    """The first version of ``versions`` committed at or after ``timestamp_ms``."""
    if not versions:
        raise SourceError(f"{path} is not a Delta table: it has no commits")
    last = time_of(versions[-1])
    if timestamp_ms > last:
        raise _after_latest(timestamp_ms, last, path)
    low, high = 0, len(versions) - 1
    while low < high:
        middle = (low + high) // 2
        if time_of(versions[middle]) >= timestamp_ms:
            high = middle
        else:
            low = middle + 1
    return versions[low]


def version_at_or_before(
    timestamp_ms: int, versions: list[int], time_of: Callable[[int], int], path: str
) -> int:
    """The latest version of ``versions`` committed at or before ``timestamp_ms``."""
    if not versions:
        raise SourceError(f"{path} is not a Delta table: it has no commits")
    first, last = time_of(versions[0]), time_of(versions[-1])
    if timestamp_ms > last:
        raise _after_latest(timestamp_ms, last, path)
    if timestamp_ms < first:
        raise SourceError(
            f"The provided timestamp ({format_ms(timestamp_ms)}) is before the earliest version "
            f"available to this table ({format_ms(first)}). Please use a timestamp after "
            f"{format_ms(first)}. (The Delta table at {path}.)"
        )
    low, high = 0, len(versions) - 1
    while low < high:
        middle = (low + high + 1) // 2
        if time_of(versions[middle]) <= timestamp_ms:
            low = middle
        else:
            high = middle - 1
    return versions[low]
