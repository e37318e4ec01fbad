"""What the JSON and CSV readers share for Spark's parse modes.

Malformed records become corrupt records (``PERMISSIVE``, in the :data:`CORRUPT` column until
the source renames it), disappear (``DROPMALFORMED``, counted in a :class:`DropCounter` and
logged with the file and line of the first) or fail the read with the file and line number
(``FAILFAST``, :func:`failfast_error`). CSV blocks are read in ``_csv_reader``, JSON ones in
``_json_spark``.
"""

from __future__ import annotations

import logging
import threading

from microbatch.errors import SourceError

__all__ = [
    "CORRUPT",
    "DropCounter",
    "MalformedRecordError",
    "failfast_error",
]

log = logging.getLogger("microbatch.file")

CORRUPT = "__microbatch_corrupt_record__"
"""The column holding the raw text of malformed lines (renamed by the source)."""


class MalformedRecordError(SourceError):
    """A malformed line under ``mode=FAILFAST``; names the file and the line."""


class DropCounter:
    """The malformed lines (records) dropped under ``mode=DROPMALFORMED``.

    Splits are read on several threads at once: :meth:`add` may be called from any of them.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0

    def __reduce__(self) -> tuple[type[DropCounter], tuple[()]]:
        """A pickled counter starts again at 0 in the process that unpickles it (a lock cannot
        be pickled; that process counts and logs its own drops)."""
        return DropCounter, ()

    @property
    def count(self) -> int:
        """Lines dropped so far."""
        with self._lock:
            return self._count

    def add(self, count: int, where: str, line: int, kind: str, unit: str = "line") -> None:
        """Count ``count`` dropped lines of ``where``, the first at ``line``, and log it."""
        if count <= 0:
            return
        with self._lock:
            self._count += count
        log.warning(
            "Dropped %d malformed %s %s(s) of %s (parse mode DROPMALFORMED); the first is at %s %d",
            count,
            kind,
            unit,
            where,
            unit,
            line,
        )


def failfast_error(
    kind: str, where: str, line: int, reason: str, unit: str = "line"
) -> MalformedRecordError:
    """The ``FAILFAST`` error for the malformed ``kind`` record at ``line`` of ``where``."""
    return MalformedRecordError(
        f"[MALFORMED_RECORD_IN_PARSING] Malformed {kind} record in {where} at {unit} {line} "
        f"(parse mode FAILFAST): {reason}. Fix or remove the line, or set option mode to "
        "PERMISSIVE (bad values become null) or DROPMALFORMED (bad lines are dropped)."
    )
