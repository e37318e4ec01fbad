"""The ``memory`` sink: a query's output as a table of the session, for tests and notebooks."""

from __future__ import annotations

import logging
from typing import ClassVar

import pyarrow as pa

import microbatch as mb
from microbatch.connector import Guarantee, OutputMode
from microbatch.errors import ConfigurationError
from microbatch.options import OptionSpec

from .table import MemoryTable, attach_table

__all__ = ["MemorySink", "MemoryWriter"]

log = logging.getLogger(__name__)


class MemorySink(mb.Sink):
    """Keeps every batch in process memory, readable as ``session.table(query_name)``.

    Append and update mode add each batch's rows; complete mode replaces the contents with each
    batch. A replayed batch id is skipped, so the table holds each batch once. The data is lost
    with the process.

    The table is attached (and registered with the session) when the query's writer is made,
    at ``start()``; the parts of a batch are gathered by picklable part writers and the whole
    batch is applied at commit.
    """

    format_name: ClassVar[str] = "memory"
    description: ClassVar[str] = (
        "Keeps the output in process memory as the table session.table(queryName) (tests)."
    )
    options: ClassVar[OptionSpec] = OptionSpec()
    capabilities: ClassVar[mb.SinkCapabilities] = mb.SinkCapabilities(
        output_modes=frozenset(OutputMode),
        guarantee=Guarantee.EXACTLY_ONCE,
        needs_checkpoint=False,
    )

    table_name: str | None = None
    """The table this sink writes, known once :meth:`stream_writer` ran."""

    def stream_writer(self, context: mb.WriteContext) -> MemoryWriter:
        name = context.query_name
        if not name:
            raise ConfigurationError(
                'queryName must be specified for memory sink: call .query_name("...") on '
                "write_stream before start()"
            )
        session = context.session if context.session is not None else self.session
        table = attach_table(session, name, context.schema, context.query_id)
        if session is not None:
            session.register_table(name, table.to_table)
        self.table_name = name
        return MemoryWriter(context, table)

    def describe(self) -> str:
        return f"MemorySink[{self.table_name}]" if self.table_name else "MemorySink"


class MemoryWriter(mb.BatchWriter):
    """Applies each batch to the query's :class:`MemoryTable` at commit."""

    def __init__(self, context: mb.WriteContext, table: MemoryTable) -> None:
        super().__init__(context)
        self.table: MemoryTable = table
        """The table this writer applies batches to (also ``session.table(name)``)."""

    def add_batch(self, table: pa.Table, batch_id: int) -> None:
        replace = self.context.output_mode == OutputMode.COMPLETE
        if not self.table.apply(batch_id, table, replace=replace):
            log.info("memory table '%s' already holds batch %d: skipped", self.table.name, batch_id)
