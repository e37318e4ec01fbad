"""Sinks that hand batches and rows to Python code: ``foreachBatch``, ``foreach`` and ``noop``.

- :class:`ForeachBatchSink` calls ``function(batch: pyarrow.Table, batch_id: int)`` per batch
  (``write_stream.foreach_batch(function)``), through its :class:`ForeachBatchWriter`;
- :class:`ForeachSink` calls a writer for every row (``write_stream.foreach(writer)``), from a
  picklable :class:`ForeachPartWriter` per split;
- :class:`NoopSink` discards everything (benchmarks).

:class:`microbatch.BatchLedger` (in the core) makes a ``foreach_batch`` function apply each
batch exactly once to a transactional database.
"""

from __future__ import annotations

from ._messages import RowsProcessed
from .foreach import ForeachPartWriter, ForeachSink, ForeachWriter
from .foreach_batch import ForeachBatchSink, ForeachBatchWriter
from .noop import NoopSink, NoopWriter

__all__ = [
    "ForeachBatchSink",
    "ForeachBatchWriter",
    "ForeachPartWriter",
    "ForeachSink",
    "ForeachWriter",
    "NoopSink",
    "NoopWriter",
    "RowsProcessed",
]
