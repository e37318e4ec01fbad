"""The options of the ``delta`` source, with Delta Lake's names, defaults and texts.

Values are checked when the query is built; the texts of refused values follow Delta's
``Invalid value '<value>' for option '<name>', <explanation>``.
"""

from __future__ import annotations

import datetime as _dt
import re
from typing import Any

from microbatch import AtMostOneOf, Option, OptionSpec

from ._table import PATH_OPTION, STORAGE_OPTIONS_OPTION, STORAGE_PREFIX

__all__ = [
    "DEFAULT_MAX_FILES_PER_TRIGGER",
    "SOURCE_OPTIONS",
    "parse_size",
    "parse_timestamp_ms",
    "starting_version",
]

DEFAULT_MAX_FILES_PER_TRIGGER = 1000
"""Delta's ``maxFilesPerTrigger`` when neither limit is given."""

_SIZE = re.compile(r"\s*(\d+)\s*([kmgtp]?)i?b?\s*", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}


def _invalid(name: str, value: Any, explain: str) -> str:
    return f"Invalid value '{value}' for option '{name}', {explain}"


def parse_size(value: Any) -> int:
    """Bytes of a size such as ``10g``, ``512m``, ``100k`` or ``1048576`` (Spark's byte
    strings: binary units, an optional ``b``); ``ValueError`` when it is not one."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    match = _SIZE.fullmatch(str(value))
    if match is None:
        raise ValueError(str(value))
    return int(match[1]) * _UNITS[match[2].lower()]


def _check_max_bytes(value: str) -> str | None:
    try:
        size = parse_size(value)
    except ValueError:
        size = 0
    if size <= 0:
        return _invalid("maxBytesPerTrigger", value, "must be a size configuration such as '10g'")
    return None


def starting_version(value: str) -> int | None:
    """The version ``startingVersion`` names; ``None`` for ``latest``."""
    text = str(value).strip()
    if text.lower() == "latest":
        return None
    return int(text)


def _check_starting_version(value: str) -> str | None:
    try:
        version = starting_version(value)
    except ValueError:
        version = -1
    if version is not None and version < 0:
        return _invalid("startingVersion", value, "must be greater than or equal to zero")
    return None


def parse_timestamp_ms(value: Any, name: str = "timestamp") -> int:
    """Milliseconds since the epoch of a timestamp option.

    Accepts a date (``2024-05-01``), an ISO-8601 date and time (``2024-05-01 12:00:00``,
    ``2024-05-01T12:00:00.250Z``, ``...+02:00``) or epoch milliseconds (13 digits or more: a
    number of epoch seconds is refused rather than read as a time in 1970); a time without a
    zone is UTC. ``ValueError`` names the option when the text is none of these.
    """
    if isinstance(value, _dt.datetime):
        moment = value
    else:
        text = str(value).strip()
        if re.fullmatch(r"\d{13,}", text):  # epoch milliseconds (epoch seconds are refused)
            return int(text)
        try:
            moment = _dt.datetime.fromisoformat(text.replace(" ", "T", 1) if " " in text else text)
        except ValueError:
            raise ValueError(
                _invalid(
                    name,
                    value,
                    "must be a timestamp such as '2024-05-01', '2024-05-01 12:00:00' or "
                    "'2024-05-01T12:00:00Z' (UTC unless a zone is given), or epoch "
                    "milliseconds (13 digits)",
                )
            ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=_dt.UTC)
    return int(moment.timestamp() * 1000)


def _timestamp_check(name: str) -> Any:
    def check(value: str) -> str | None:
        try:
            parse_timestamp_ms(value, name)
        except ValueError as error:
            return str(error)
        return None

    return check


def _check_positive_files(value: int) -> str | None:
    if value <= 0:
        return _invalid("maxFilesPerTrigger", value, "must be a positive integer")
    return None


SOURCE_OPTIONS = OptionSpec(
    PATH_OPTION,
    STORAGE_OPTIONS_OPTION,
    Option(
        name="startingVersion",
        validate=_check_starting_version,
        doc="Where a new stream starts: a table version (its changes onwards, without the "
        "snapshot before it) or 'latest' (only versions committed after the start). Without it "
        "and startingTimestamp the stream reads the table's snapshot at the version current "
        "when the query first starts, then every later version. Only used when the checkpoint "
        "has no offsets yet.",
    ),
    Option(
        name="startingTimestamp",
        validate=_timestamp_check("startingTimestamp"),
        doc="Where a new stream starts, as a time: the first version committed at or after it "
        "('2024-05-01', '2024-05-01 12:00:00', ISO-8601; UTC unless a zone is given). A time "
        "after the latest commit is an error. Only used when the checkpoint has no offsets yet.",
    ),
    Option(
        name="maxFilesPerTrigger",
        type="int",
        validate=_check_positive_files,
        doc="At most this many new data files per batch (default 1000 when maxBytesPerTrigger "
        "is not set either). A batch takes at least one file.",
    ),
    Option(
        name="maxBytesPerTrigger",
        validate=_check_max_bytes,
        doc="About this much data per batch ('10g', '512m', bytes): a soft limit, files are "
        "taken while the batch is below it, so a batch may exceed it by one file and always "
        "takes at least one. With maxFilesPerTrigger too, whichever is reached first.",
    ),
    Option(
        name="ignoreDeletes",
        type="bool",
        default=False,
        doc="Skip versions that only remove data files (a DELETE of whole files or "
        "partitions) instead of failing the query; they are counted in the progress metrics.",
    ),
    Option(
        name="ignoreChanges",
        type="bool",
        default=False,
        doc="For versions that rewrite data files (UPDATE, MERGE, DELETE inside files, "
        "overwrite), stream the files they add again instead of failing: unchanged rows of "
        "those files come again, deleted rows are not reported. Implies ignoreDeletes.",
    ),
    Option(
        name="skipChangeCommits",
        type="bool",
        default=False,
        doc="Skip every version that removes data files (deletes, updates, merges, "
        "overwrites) instead of failing the query; they are counted in the progress metrics.",
    ),
    Option(
        name="readChangeFeed",
        type="bool",
        default=False,
        doc="Stream the table's change data feed (rows with _change_type, _commit_version and "
        "_commit_timestamp) instead of its added rows; the table must have "
        "delta.enableChangeDataFeed=true. Without startingVersion/startingTimestamp the first "
        "batches hold the snapshot as 'insert' rows.",
    ),
    Option(
        name="failOnDataLoss",
        type="bool",
        default=True,
        doc="Fail the query when log entries it has not read yet are gone (removed by log "
        "clean-up after a checkpoint); false logs a warning, skips to the next version the "
        "log keeps and counts the lost versions in the progress metrics (numLostVersions).",
    ),
    Option(
        name="versionAsOf",
        type="int",
        minimum=0,
        doc="Batch reads (session.read) only: read the table as it was at this version.",
    ),
    Option(
        name="timestampAsOf",
        validate=_timestamp_check("timestampAsOf"),
        doc="Batch reads (session.read) only: read the table as it was at this time (the "
        "latest version committed at or before it).",
    ),
    prefixes=(STORAGE_PREFIX,),
    rules=(
        AtMostOneOf(
            "startingVersion",
            "startingTimestamp",
            hint="Please either provide 'startingVersion' or 'startingTimestamp'",
        ),
        AtMostOneOf(
            "versionAsOf",
            "timestampAsOf",
            hint="Cannot specify both version and timestamp when time travelling the table",
        ),
    ),
)
"""The options of ``format("delta")`` as a source."""
