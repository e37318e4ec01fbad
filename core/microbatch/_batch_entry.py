"""Offset-log entries of the checkpoint, in both formats this code reads.

Format 2 (written by every release after 0.1)::

    {"version": 2, "batchId": 7, "batchTimestampMs": 1700000000000, "batchWatermarkMs": 0,
     "conf": {"multipleWatermarkPolicy": "min"},
     "sources": [{"start": {...} | null, "end": {...}}]}

``sources`` holds one range per source of the query, in plan order (``sources/<i>`` of the
checkpoint is the state of source ``i``). ``batchWatermarkMs`` is the event-time watermark the
batch runs with (0 until a query has one), ``conf`` the session settings fixed for the
checkpoint's lifetime (see :data:`microbatch._session.FIXED_PER_CHECKPOINT`).

Format 1 (microbatch 0.1) has no ``version`` and exactly one source::

    {"batchId": 7, "batchTimestampMs": 1700000000000, "start": {...} | null, "end": {...}}

It reads as a format-2 entry with one source, watermark 0 and no recorded settings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import CheckpointError, CorruptCheckpointError

__all__ = [
    "FORMAT_VERSION",
    "READABLE_VERSIONS",
    "BatchEntry",
    "SourceRange",
    "check_format_version",
    "log_id",
]

FORMAT_VERSION = 2
"""The checkpoint format this code writes (metadata ``version`` and each offset entry's)."""
READABLE_VERSIONS = (1, 2)
"""The checkpoint formats this code reads; format 1 is upgraded in place on a query's start."""


def log_id(value: Any) -> int:
    """A batch id read from a log entry: a non-negative int (``True`` is not one)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"'batchId' must be a non-negative integer, got {value!r}")
    return value


def check_format_version(version: Any, where: str) -> int:
    """``version`` as read from the checkpoint file ``where``, checked to be one this code
    reads: :class:`CorruptCheckpointError` when it is not a positive integer,
    :class:`CheckpointError` naming the versions this code reads when it is a newer one."""
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise CorruptCheckpointError(
            f"Checkpoint file {where} has format version {version!r}, which is not a positive "
            "integer: the file is damaged. Restore it from a backup, or start the query with a "
            "new checkpoint location."
        )
    if version not in READABLE_VERSIONS:
        readable = " and ".join(str(v) for v in READABLE_VERSIONS)
        raise CheckpointError(
            f"Checkpoint file {where} has format version {version}; this microbatch reads "
            f"format versions {readable} only. It was written by a newer microbatch: upgrade "
            "microbatch to use this checkpoint."
        )
    return version


@dataclass(frozen=True)
class SourceRange:
    """What one source reads in a batch: the offsets ``(start, end]`` (``start`` is ``None``
    when the source had no offset before the batch)."""

    start: dict[str, Any] | None
    end: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"start": self.start, "end": self.end}


@dataclass(frozen=True)
class BatchEntry:
    """One offset-log entry: batch ``batch_id`` reads ``sources[i]`` from source ``i``.

    ``timestamp_ms`` is the batch's processing time (the same when the batch is re-run),
    ``watermark_ms`` the event-time watermark it runs with, ``conf`` the session settings fixed
    for the checkpoint as this entry recorded them (empty for a format-1 entry).
    ``format_version`` says in which format the entry was read (not compared).
    """

    batch_id: int
    sources: tuple[SourceRange, ...]
    timestamp_ms: int
    watermark_ms: int = 0
    conf: Mapping[str, Any] = field(default_factory=dict)
    format_version: int = field(default=FORMAT_VERSION, compare=False)

    def __post_init__(self) -> None:
        if not self.sources:
            raise ValueError("a batch entry needs the range of at least one source")
        object.__setattr__(self, "sources", tuple(self.sources))

    @property
    def start(self) -> dict[str, Any] | None:
        """Where source 0's range starts (``None``: before its first offset)."""
        return self.sources[0].start

    @property
    def end(self) -> dict[str, Any]:
        """Where source 0's range ends."""
        return self.sources[0].end

    def to_json(self) -> dict[str, Any]:
        """The entry in the current format (format 2)."""
        return {
            "version": FORMAT_VERSION,
            "batchId": self.batch_id,
            "batchTimestampMs": self.timestamp_ms,
            "batchWatermarkMs": self.watermark_ms,
            "conf": dict(self.conf),
            "sources": [source.to_json() for source in self.sources],
        }

    @classmethod
    def from_json(cls, value: Any, where: str) -> BatchEntry:
        """The entry stored in the checkpoint file ``where``, in format 1 or 2.

        :class:`CorruptCheckpointError` names the file when a field is missing or wrong, and
        :class:`CheckpointError` when the entry is in a newer format than this code reads.
        """
        if not isinstance(value, dict):
            raise _invalid(where, "it is not a JSON object")
        version = check_format_version(value.get("version", 1), where)
        try:
            if version == 1:
                return cls(
                    batch_id=log_id(value["batchId"]),
                    sources=(SourceRange(value["start"], value["end"]),),
                    timestamp_ms=int(value["batchTimestampMs"]),
                    format_version=1,
                )
            return cls(
                batch_id=log_id(value["batchId"]),
                sources=_sources(value["sources"]),
                timestamp_ms=_integer(value, "batchTimestampMs"),
                watermark_ms=_integer(value, "batchWatermarkMs"),
                conf=_conf(value["conf"]),
                format_version=version,
            )
        except KeyError as error:
            raise _invalid(where, f"missing or bad field {error}") from None
        except (TypeError, ValueError) as error:
            raise _invalid(where, str(error)) from None


def _invalid(where: str, why: str) -> CorruptCheckpointError:
    return CorruptCheckpointError(
        f"Checkpoint file {where} is not a valid offset log entry ({why}). Restore it, or "
        "delete it and later entries to re-plan them."
    )


def _integer(value: dict[str, Any], name: str) -> int:
    found = value[name]
    if isinstance(found, bool) or not isinstance(found, int) or found < 0:
        raise ValueError(f"{name!r} must be a non-negative integer, got {found!r}")
    return found


def _sources(value: Any) -> tuple[SourceRange, ...]:
    if not isinstance(value, list) or not value:
        raise ValueError("'sources' must be a non-empty list of source ranges")
    ranges = []
    for index, item in enumerate(value):
        if not isinstance(item, dict) or "start" not in item or "end" not in item:
            raise ValueError(f"source {index} is not a range with 'start' and 'end'")
        ranges.append(SourceRange(item["start"], item["end"]))
    return tuple(ranges)


def _conf(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict) or not all(isinstance(key, str) for key in value):
        raise ValueError("'conf' must be an object of setting names and values")
    return value
