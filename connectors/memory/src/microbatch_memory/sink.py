"""The ``memory`` sink: a query's output as a table of the session, for tests and notebooks."""

from __future__ import annotations

import logging
from typing import ClassVar

import pyarrow as pa

from microbatch.connector import BatchSink, Guarantee, OutputMode, SinkContext
from microbatch.errors import ConfigurationError
from microbatch.options import OptionSpec

from .table import MemoryTable, attach_table

__all__ = ["MemorySink"]

log = logging.getLogger(__name__)


class MemorySink(BatchSink):
    """Keeps every batch in process memory, readable as ``session.table(query_name)``.

    Append and update mode add each batch's rows; complete mode replaces the contents with each
    batch. A replayed batch id is skipped, so the table holds each batch once. The data is lost
    with the process.
    """

    format_name: ClassVar[str] = "memory"
    description: ClassVar[str] = (
        "Keeps the output in process memory as the table session.table(queryName) (tests)."
    )
    options: ClassVar[OptionSpec] = OptionSpec()
    output_modes: ClassVar[frozenset[OutputMode]] = frozenset(OutputMode)
    guarantee: ClassVar[Guarantee] = Guarantee.EXACTLY_ONCE
    needs_checkpoint: ClassVar[bool] = False

    def __init__(self, context: SinkContext) -> None:
        super().__init__(context)
        name = context.query_name
        if not name:
            raise ConfigurationError(
                'queryName must be specified for memory sink: call .query_name("...") on '
                "write_stream before start()"
            )
        self.table: MemoryTable = attach_table(
            context.session, name, context.schema, context.query_id
        )
        """The table this sink writes (also ``session.table(name)``)."""
        if context.session is not None:
            context.session.register_table(name, self.table.to_table)

    def add_batch(self, batch_id: int, table: pa.Table) -> None:
        replace = self.context.output_mode == OutputMode.COMPLETE
        if not self.table.apply(batch_id, table, replace=replace):
            log.info("memory table '%s' already holds batch %d: skipped", self.table.name, batch_id)

    def describe(self) -> str:
        return f"MemorySink[{self.table.name}]"
