"""The ``noop`` sink: reads every batch and keeps nothing (for benchmarks)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import pyarrow as pa

import microbatch as mb
from microbatch.connector import OutputMode
from microbatch.options import OptionSpec

from ._messages import RowsProcessed

__all__ = ["NoopSink", "NoopWriter"]


class NoopSink(mb.Sink):
    """Consumes every row of every batch and discards it, so a query runs at full cost with
    no output. Useful to measure sources and transforms."""

    format_name: ClassVar[str] = "noop"
    description: ClassVar[str] = "Discards every row (benchmarks)."
    options: ClassVar[OptionSpec] = OptionSpec()
    capabilities: ClassVar[mb.SinkCapabilities] = mb.SinkCapabilities(
        output_modes=frozenset(OutputMode), needs_checkpoint=False
    )

    def stream_writer(self, context: mb.WriteContext) -> NoopWriter:
        return NoopWriter()


class NoopWriter(mb.StreamWriter, mb.PartWriter):
    """Drains each part and commits nothing; it holds no state, so it is its own picklable
    part writer."""

    def write(self, data: pa.RecordBatchReader, part: mb.PartContext) -> RowsProcessed:
        """Drain one part; the message holds its row count."""
        return RowsProcessed(sum(batch.num_rows for batch in data))

    def commit(self, messages: Sequence[mb.CommitMessage | None], batch_id: int) -> None:
        """Nothing to make visible."""
