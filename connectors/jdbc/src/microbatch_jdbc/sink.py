"""The ``jdbc`` sink: each batch in one database transaction with its ledger row, exactly once.

``df.write_stream.format("jdbc").option("url", "postgresql+psycopg://user@host/db")
.option("dbtable", "events").option("checkpointLocation", ...).start()``. The URL is a
SQLAlchemy URL; Spark's option names are accepted. Output modes: append (each batch inserts
its rows), complete (each batch replaces the table's rows: dropped and re-created, or emptied
with ``truncate``), update (with ``mode=upsert``: each batch upserts by ``keys``). PostgreSQL
gets binary COPY; other dialects an ``INSERT`` executemany. SQLAlchemy is imported when a query
starts, never with the plugin.
"""

from __future__ import annotations

import microbatch as mb

from ._sink_options import ISOLATION_LEVELS, SINK_OPTIONS

__all__ = ["JdbcSink"]


class JdbcSink(mb.Sink):
    """``format("jdbc")`` as a sink: SQL tables through SQLAlchemy, exactly once."""

    format_name = "jdbc"
    description = "SQL tables through SQLAlchemy, exactly once (append, complete, upsert)."
    options = SINK_OPTIONS
    capabilities = mb.SinkCapabilities(
        output_modes=frozenset(
            {mb.OutputMode.APPEND, mb.OutputMode.COMPLETE, mb.OutputMode.UPDATE}
        ),
        guarantee=mb.Guarantee.EXACTLY_ONCE,
    )

    def describe(self) -> str:
        from ._connection import database_from_options
        from ._tables import shown_name

        upsert = f", upsert by {', '.join(self.opts['keys'])}" if self.opts.mode == "upsert" else ""
        shown = database_from_options(self.opts).shown
        return f"JdbcSink[{shown_name(self.opts.dbtable)} in {shown}{upsert}]"

    def stream_writer(self, context: mb.WriteContext) -> mb.StreamWriter:
        from ._connection import database_from_options
        from ._sink_writer import JdbcStreamWriter, SinkSettings
        from ._tables import parse_column_types, parse_table_name

        opts = self.opts
        upsert = opts.mode == "upsert"
        if context.output_mode == mb.OutputMode.UPDATE and not upsert:
            raise mb.UnsupportedOperationError(
                "The jdbc sink takes update output mode only with mode=upsert: set "
                ".option('mode', 'upsert').option('keys', '<key columns>') to upsert each "
                "batch's rows by key, or use append or complete output mode"
            )
        complete = context.output_mode == mb.OutputMode.COMPLETE
        if complete and upsert:
            raise mb.UnsupportedOperationError(
                "The jdbc sink's mode=upsert does not apply in complete output mode (each "
                "batch replaces the table): use mode=append, or update output mode"
            )
        parse_table_name(opts.dbtable)
        keys = tuple(opts.get("keys") or ())
        if upsert:
            missing = [key for key in keys if key not in context.schema.names]
            if missing:
                raise mb.ConfigurationError(
                    f"option 'keys' names column(s) {', '.join(map(repr, missing))} that the "
                    f"stream does not have (its columns: {', '.join(context.schema.names)})"
                )
        settings = SinkSettings(
            dbtable=opts.dbtable,
            upsert_keys=keys if upsert else (),
            complete=complete,
            create_if_missing=opts.create_table_if_missing,
            column_types=tuple(parse_column_types(opts.create_table_column_types).items()),
            truncate=opts.truncate,
            batchsize=opts.batchsize,
            isolation_level=ISOLATION_LEVELS[opts.isolation_level.upper()],
            ledger_table=opts.ledger_table,
        )
        return JdbcStreamWriter(
            database_from_options(opts), settings, context, secrets=opts.secret_values()
        )
