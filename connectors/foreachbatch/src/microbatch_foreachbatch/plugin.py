"""Registers the ``foreachBatch``, ``foreach`` and ``noop`` sinks with microbatch."""

from __future__ import annotations

from typing import TYPE_CHECKING

from microbatch import hookimpl

if TYPE_CHECKING:
    from microbatch import Registrar


@hookimpl
def microbatch_register_connectors(registry: Registrar) -> None:
    from .foreach import ForeachSink
    from .foreach_batch import ForeachBatchSink
    from .noop import NoopSink

    registry.add_sink(ForeachBatchSink)
    registry.add_sink(ForeachSink)
    registry.add_sink(NoopSink)
