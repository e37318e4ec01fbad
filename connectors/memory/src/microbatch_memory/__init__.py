"""In-memory connectors for microbatch: the ``memory`` sink and the ``memory`` source.

- :class:`MemorySink` keeps a query's output as ``session.table(query_name)``; its
  :class:`MemoryWriter` applies each batch; :func:`memory_table` returns the
  :class:`MemoryTable` behind a name.
- :class:`MemoryStream` is a stream fed from Python (``add_data``), read by
  :class:`MemoryStreamSource` through ``stream.to_frame(session)``; its per-run
  :class:`MemoryStreamReader` plans one :class:`MemorySplit` (which carries its rows) per
  added batch, read by the picklable :class:`MemorySplitReader`.
"""

from __future__ import annotations

from .sink import MemorySink, MemoryWriter
from .stream import (
    MemorySplit,
    MemorySplitReader,
    MemoryStream,
    MemoryStreamReader,
    MemoryStreamSource,
)
from .table import MemoryTable, memory_table

__all__ = [
    "MemorySink",
    "MemorySplit",
    "MemorySplitReader",
    "MemoryStream",
    "MemoryStreamReader",
    "MemoryStreamSource",
    "MemoryTable",
    "MemoryWriter",
    "memory_table",
]
