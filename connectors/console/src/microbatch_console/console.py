"""``console``: prints every batch as a table, for debugging."""

from __future__ import annotations

import sys
import threading
from typing import Any, TextIO

import pyarrow as pa

import microbatch as mb

from ._render import show_string

__all__ = ["ConsoleSink", "ConsoleWriter"]

_RULE = "-" * 43
_PRINTING = threading.Lock()  # keeps the batches of concurrent queries apart


class ConsoleSink(mb.Sink):
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

    The parts of a batch are gathered by picklable part writers (:class:`microbatch.BatchWriter`)
    and printed together, in part order, by the :class:`ConsoleWriter` when the batch commits.
    """

    format_name = "console"
    description = "Prints each batch as a table on standard output, for debugging."
    options = mb.OptionSpec(
        mb.Option(
            name="numRows",
            type="int",
            default=20,
            minimum=0,
            doc="How many rows of each batch to print.",
        ),
        mb.Option(
            name="truncate",
            type="bool",
            default=True,
            doc="Cut cell text longer than 20 characters (and right-align cells).",
        ),
    )
    capabilities = mb.SinkCapabilities(
        output_modes=frozenset(mb.OutputMode),
        guarantee=mb.Guarantee.AT_LEAST_ONCE,
        needs_checkpoint=False,
    )

    def __init__(self, options: mb.Options, *, session: Any = None) -> None:
        super().__init__(options, session=session)
        self.num_rows: int = self.opts.num_rows
        self.truncate: bool = self.opts.truncate
        self.stream: TextIO | None = None
        """Where the writers made from now on print; ``None`` means ``sys.stdout`` at the time
        of printing."""

    def describe(self) -> str:
        return f"ConsoleSink[numRows={self.num_rows}, truncate={str(self.truncate).lower()}]"

    def stream_writer(self, context: mb.WriteContext) -> ConsoleWriter:
        return ConsoleWriter(
            context, num_rows=self.num_rows, truncate=self.truncate, stream=self.stream
        )


class ConsoleWriter(mb.BatchWriter):
    """Prints each committed batch; one per query run."""

    def __init__(
        self,
        context: mb.WriteContext,
        *,
        num_rows: int,
        truncate: bool,
        stream: TextIO | None = None,
    ) -> None:
        super().__init__(context)
        self.num_rows = num_rows
        self.truncate = truncate
        self.stream = stream
        """Where batches are printed; ``None`` means ``sys.stdout`` at the time of printing."""

    def add_batch(self, table: pa.Table, batch_id: int) -> None:
        text = f"{_RULE}\nBatch: {batch_id}\n{_RULE}\n"
        text += show_string(table, self.num_rows, self.truncate) + "\n"
        stream = self.stream if self.stream is not None else sys.stdout
        with _PRINTING:
            stream.write(text)
            stream.flush()
