"""``console``: prints every batch as a table, for debugging."""

from __future__ import annotations

import sys
import threading
from typing import TextIO

import pyarrow as pa

from microbatch import BatchSink, Option, OptionSpec, OutputMode, SinkContext

from ._render import show_string

__all__ = ["ConsoleSink"]

_RULE = "-" * 43
_PRINTING = threading.Lock()  # keeps the batches of concurrent queries apart


class ConsoleSink(BatchSink):
    """Prints each batch as Spark's console sink does::

        -------------------------------------------
        Batch: 0
        -------------------------------------------
        +---+-----+
        |  a|    b|
        +---+-----+
        |  1|hello|
        +---+-----+

    followed by ``only showing top N rows`` when the batch has more than ``numRows`` rows.
    Works in every output mode (complete mode prints the whole result each time). A replayed
    batch is printed again.
    """

    format_name = "console"
    description = "Prints each batch as a table on standard output, for debugging."
    output_modes = frozenset(OutputMode)
    needs_checkpoint = False
    options = OptionSpec(
        Option(
            name="numRows",
            type="int",
            default=20,
            minimum=0,
            doc="How many rows of each batch to print.",
        ),
        Option(
            name="truncate",
            type="bool",
            default=True,
            doc="Cut cell text longer than 20 characters (and right-align cells).",
        ),
    )

    def __init__(self, context: SinkContext) -> None:
        super().__init__(context)
        self.num_rows: int = self.opts.num_rows
        self.truncate: bool = self.opts.truncate
        self.stream: TextIO | None = None
        """Where batches are printed; ``None`` means ``sys.stdout`` at the time of printing."""

    def describe(self) -> str:
        return f"ConsoleSink[numRows={self.num_rows}, truncate={str(self.truncate).lower()}]"

    def add_batch(self, batch_id: int, table: pa.Table) -> None:
        text = f"{_RULE}\nBatch: {batch_id}\n{_RULE}\n"
        text += show_string(table, self.num_rows, self.truncate) + "\n"
        stream = self.stream if self.stream is not None else sys.stdout
        with _PRINTING:
            stream.write(text)
            stream.flush()
