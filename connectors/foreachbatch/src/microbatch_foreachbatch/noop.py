"""The ``noop`` sink: reads every batch and keeps nothing (for benchmarks)."""

from __future__ import annotations

from typing import Any, ClassVar

import pyarrow as pa

from microbatch.connector import OutputMode, Sink
from microbatch.options import OptionSpec

__all__ = ["NoopSink"]


class NoopSink(Sink):
    """Consumes every row of every batch and discards it, so a query runs at full cost with
    no output. Useful to measure sources and transforms."""

    format_name: ClassVar[str] = "noop"
    description: ClassVar[str] = "Discards every row (benchmarks)."
    options: ClassVar[OptionSpec] = OptionSpec()
    output_modes: ClassVar[frozenset[OutputMode]] = frozenset(OutputMode)
    needs_checkpoint: ClassVar[bool] = False

    def write(self, batch_id: int, data: pa.RecordBatchReader) -> int:
        """Drain one split; returns its row count."""
        return sum(batch.num_rows for batch in data)

    def commit(self, batch_id: int, messages: list[Any]) -> None:
        """Nothing to make visible."""
