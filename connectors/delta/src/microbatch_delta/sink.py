"""The ``delta`` sink: each batch in one Delta commit, exactly once, through delta-rs.

``session.read_stream...write_stream.format("delta").option("path", p).start()`` (or
``.start(p)``). Output modes: append (each batch adds its rows), complete (each batch replaces
the table), update (with ``mode=merge``: each batch upserts by ``mergeKeys``). The parts of a
batch write parquet files into the table's folder in parallel; the stream writer
(``_commit``) makes them visible in one commit that carries the query's application
transaction, so a replayed batch is never applied twice. ``deltalake`` is imported when a
query starts, never with the plugin.
"""

from __future__ import annotations

import logging

import microbatch as mb

from ._sink_options import SINK_OPTIONS, table_properties
from ._table import target_from_options

__all__ = ["DeltaSink"]

log = logging.getLogger("microbatch.delta")


class DeltaSink(mb.Sink):
    """``format("delta")`` as a sink: Delta Lake tables, one commit per batch, exactly once."""

    format_name = "delta"
    description = "Delta Lake tables through delta-rs, exactly once (append, complete, merge)."
    options = SINK_OPTIONS
    capabilities = mb.SinkCapabilities(
        output_modes=frozenset(
            {mb.OutputMode.APPEND, mb.OutputMode.COMPLETE, mb.OutputMode.UPDATE}
        ),
        guarantee=mb.Guarantee.EXACTLY_ONCE,
        partition_by=True,
    )

    def describe(self) -> str:
        mode = ", merge" if self.opts.mode == "merge" else ""
        return f"DeltaSink[{target_from_options(self.opts).uri}{mode}]"

    def stream_writer(self, context: mb.WriteContext) -> mb.StreamWriter:
        from ._commit import DeltaStreamWriter, SinkSettings
        from ._delta_schema import delta_arrow_schema

        opts = self.opts
        merge = opts.mode == "merge"
        complete = context.output_mode == mb.OutputMode.COMPLETE
        _check_modes(context.output_mode, merge=merge, overwrite_schema=opts.overwrite_schema)
        schema = delta_arrow_schema(context.schema)
        if merge:
            from ._merge import check_merge_keys

            check_merge_keys(schema, opts.merge_keys)
        target = target_from_options(opts)
        settings = SinkSettings(
            partition_by=tuple(context.partition_by),
            complete=complete,
            merge=merge,
            merge_keys=tuple(opts.merge_keys or ()),
            merge_schema=opts.merge_schema,
            overwrite_schema=opts.overwrite_schema,
            user_metadata=opts.user_metadata,
            max_records_per_file=opts.max_records_per_file,
            configuration=table_properties(opts),
        )
        writer = DeltaStreamWriter(target, schema, context.query_id, settings)
        writer.check_table()
        return writer


def _check_modes(output_mode: mb.OutputMode, *, merge: bool, overwrite_schema: bool) -> None:
    if output_mode == mb.OutputMode.UPDATE and not merge:
        raise mb.UnsupportedOperationError(
            "The delta sink takes update output mode only with mode=merge: set "
            ".option('mode', 'merge').option('mergeKeys', '<key columns>') to upsert each "
            "batch's rows by key, or use append or complete output mode"
        )
    if output_mode == mb.OutputMode.COMPLETE and merge:
        raise mb.UnsupportedOperationError(
            "The delta sink's mode=merge upserts rows by key and cannot replace the table: use "
            "update output mode with mode=merge, or complete output mode without it"
        )
    if overwrite_schema and output_mode != mb.OutputMode.COMPLETE:
        raise mb.UnsupportedOperationError(
            "option 'overwriteSchema' applies only in complete output mode, where each batch "
            "replaces the table; in append mode use mergeSchema to add new columns"
        )
