"""The ``delta`` source's offsets, in Delta Lake's own shape.

``{"sourceVersion": 1, "reservoirId": <table id>, "reservoirVersion": v, "index": i,
"isStartingVersion": b}`` means: everything up to and including file ``i`` of version ``v`` is
read. ``index`` -1 is the position before the first file of ``v``. While
``isStartingVersion`` is true the files of ``v`` are those of the table's snapshot at ``v``
(ordered by modification time, then path); otherwise they are the data-change ``add`` files of
the commit ``v`` itself, in log order. Once the last file of a version is read the offset moves
to ``(v + 1, -1, false)``, as Delta's does, so a checkpoint written by this source names the
same positions as one of Delta's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from microbatch import Offset
from microbatch.errors import CorruptCheckpointError, SourceError

__all__ = ["BASE_INDEX", "DeltaOffset"]

BASE_INDEX = -1
_SOURCE_VERSION = 1


@dataclass(frozen=True, order=True)
class DeltaOffset:
    """A position in a Delta table's stream of files (see the module docstring)."""

    version: int
    index: int
    is_starting_version: bool
    reservoir_id: str = ""

    def key(self) -> tuple[int, int]:
        """What offsets are ordered by."""
        return (self.version, self.index)

    def after_file(self, version: int, index: int, is_last: bool) -> DeltaOffset:
        """The offset once file ``index`` of ``version`` is read."""
        if is_last:
            return DeltaOffset(version + 1, BASE_INDEX, False, self.reservoir_id)
        starting = self.is_starting_version and version == self.version
        return DeltaOffset(version, index, starting, self.reservoir_id)

    def after_version(self, version: int) -> DeltaOffset:
        """The offset once all of ``version`` is read."""
        return DeltaOffset(version + 1, BASE_INDEX, False, self.reservoir_id)

    def to_json(self) -> Offset:
        return {
            "sourceVersion": _SOURCE_VERSION,
            "reservoirId": self.reservoir_id,
            "reservoirVersion": self.version,
            "index": self.index,
            "isStartingVersion": self.is_starting_version,
        }

    @classmethod
    def from_json(cls, offset: Offset, table_id: str, what: str = "offset") -> DeltaOffset:
        """Parse an offset of the checkpoint, checking it belongs to the table ``table_id``."""
        try:
            parsed = cls(
                version=_integer(offset["reservoirVersion"]),
                index=_integer(offset["index"]),
                is_starting_version=bool(offset["isStartingVersion"]),
                reservoir_id=str(offset["reservoirId"]),
            )
            source_version = _integer(offset.get("sourceVersion", _SOURCE_VERSION))
        except (KeyError, TypeError, ValueError):
            raise CorruptCheckpointError(
                f"The Delta source got the {what} {offset!r}, which is not a Delta source "
                'offset (they look like {"sourceVersion": 1, "reservoirId": "<table id>", '
                '"reservoirVersion": 3, "index": -1, "isStartingVersion": false}). The '
                "checkpoint belongs to another source."
            ) from None
        if source_version not in (1, 3):
            raise CorruptCheckpointError(
                f"The Delta source {what} {offset!r} has sourceVersion {source_version}, which "
                "this source cannot read (it reads 1 and 3)."
            )
        if parsed.index < BASE_INDEX:  # Delta's schema-change indexes (version 3)
            parsed = cls(
                parsed.version, BASE_INDEX, parsed.is_starting_version, parsed.reservoir_id
            )
        if table_id and parsed.reservoir_id and parsed.reservoir_id != table_id:
            raise SourceError(
                f"The streaming query was reading from an unexpected Delta table (id = "
                f"'{table_id}'). It used to read from another Delta table (id = "
                f"'{parsed.reservoir_id}') according to checkpoint. This may happen when you "
                "changed the code to read from a new table or you deleted and re-created a "
                "table. Please revert your change or delete your streaming query checkpoint "
                "to restart from scratch."
            )
        return parsed


def _integer(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise TypeError(value)
    return int(value)
