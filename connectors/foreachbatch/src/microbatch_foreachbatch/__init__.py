"""Sinks that hand batches and rows to Python code: ``foreachBatch``, ``foreach`` and ``noop``.

- :class:`ForeachBatchSink` calls ``function(batch: pyarrow.Table, batch_id: int)`` per batch
  (``write_stream.foreach_batch(function)``);
- :class:`ForeachSink` calls a writer for every row (``write_stream.foreach(writer)``);
- :class:`NoopSink` discards everything (benchmarks);
- :class:`BatchLedger` (module :mod:`microbatch_foreachbatch.ledger`) makes a ``foreach_batch``
  function apply each batch exactly once to a transactional database.
"""

from __future__ import annotations

from .foreach import ForeachSink
from .foreach_batch import ForeachBatchSink
from .ledger import BatchLedger
from .noop import NoopSink

__all__ = ["BatchLedger", "ForeachBatchSink", "ForeachSink", "NoopSink"]
