"""The commit message of the sinks whose parts hand rows on as they are written."""

from __future__ import annotations

from dataclasses import dataclass

import microbatch as mb

__all__ = ["RowsProcessed"]


@dataclass(frozen=True)
class RowsProcessed(mb.CommitMessage):
    """How many rows one part writer handed on (``foreach``) or drained (``noop``)."""

    rows: int
