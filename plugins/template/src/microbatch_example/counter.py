"""``example-counter``: a deterministic source that counts up, a fixed number of rows per batch."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

import microbatch as mb

__all__ = ["CounterReader", "CounterSource", "CounterSplit"]

_SCHEMA = pa.schema(
    [pa.field("id", pa.int64(), nullable=False), pa.field("value", pa.int64(), nullable=False)]
)


class CounterSource(mb.Source):
    """Row ``i`` has ``id = i`` and ``value = i * step``; every batch adds ``rowsPerBatch`` rows.

    The offset ``{"rows": n}`` counts the rows produced so far. Rows depend only on offsets,
    so a replayed batch reads exactly the same rows and nothing needs to be kept in state.
    """

    format_name = "example-counter"
    description = "Counts up, rowsPerBatch rows per batch (example connector)"
    options = mb.OptionSpec(
        mb.Option(
            name="rowsPerBatch",
            type="int",
            required=True,
            minimum=1,
            doc="Rows in each micro-batch.",
        ),
        mb.Option(
            name="step",
            type="int",
            default=1,
            doc="Difference between the values of consecutive rows.",
        ),
    )
    capabilities = mb.SourceCapabilities(replayable=True)

    def schema(self) -> pa.Schema:
        return _SCHEMA

    def describe(self) -> str:
        return f"CounterSource[rowsPerBatch={self.opts.rows_per_batch}, step={self.opts.step}]"

    def stream_reader(self, context: mb.ReadContext) -> CounterReader:
        return CounterReader(rows_per_batch=self.opts.rows_per_batch, step=self.opts.step)


@dataclass(frozen=True)
class CounterSplit(mb.Split):
    """Rows ``first`` (included) to ``stop`` (excluded)."""

    first: int
    stop: int


class CounterReader(mb.StreamReader, mb.SplitReader):
    """Offsets and planning for one run; also reads the splits (it holds only two ints, so it
    pickles as it is)."""

    def __init__(self, *, rows_per_batch: int, step: int) -> None:
        self.rows_per_batch = rows_per_batch
        self.step = step

    def initial_offset(self) -> mb.Offset:
        return {"rows": 0}

    def default_read_limit(self) -> mb.ReadLimit:
        return mb.ReadMaxRows(self.rows_per_batch)

    def latest_offset(self, start: mb.Offset, limit: mb.ReadLimit) -> mb.Offset:
        # A counter always has more: one batch per call, smaller if the limit says so.
        rows = self.rows_per_batch
        if isinstance(limit, mb.ReadMaxRows):
            rows = min(rows, limit.max_rows)
        return {"rows": start["rows"] + rows}

    def partitions(self, start: mb.Offset, end: mb.Offset) -> list[CounterSplit]:
        first, stop = start["rows"], end["rows"]
        return [CounterSplit(first, stop)] if stop > first else []

    def read(self, split: mb.Split) -> Iterator[pa.RecordBatch]:
        assert isinstance(split, CounterSplit)
        ids = pa.array(range(split.first, split.stop), type=pa.int64())
        values = pc.multiply(ids, pa.scalar(self.step, type=pa.int64()))
        yield pa.RecordBatch.from_arrays([ids, values], schema=_SCHEMA)
