"""In-memory connectors for microbatch: the ``memory`` sink and the ``memory`` source.

- :class:`MemorySink` keeps a query's output as ``session.table(query_name)``;
  :func:`memory_table` returns the :class:`MemoryTable` behind it.
- :class:`MemoryStream` is a stream fed from Python (``add_data``), read by
  :class:`MemoryStreamSource` through ``stream.to_frame(session)``.
"""

from __future__ import annotations

from .sink import MemorySink
from .stream import MemoryStream, MemoryStreamSource
from .table import MemoryTable, memory_table

__all__ = ["MemorySink", "MemoryStream", "MemoryStreamSource", "MemoryTable", "memory_table"]
