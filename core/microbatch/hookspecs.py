"""The hooks a microbatch plugin may implement. Nothing else lives here.

A plugin is a module (named by an entry point in the group ``microbatch.connectors``) with
functions marked ``@microbatch.hookimpl``. Hooks are for discovery and for watching queries;
data never flows through them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from ._registry import Registrar
    from .progress import QueryStartedEvent, QueryTerminatedEvent, StreamingQueryProgress

__all__ = ["PROJECT_NAME", "hookimpl", "hookspec"]

PROJECT_NAME = "microbatch"
hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


@hookspec
def microbatch_register_connectors(registry: Registrar) -> None:
    """Register this plugin's source and sink classes.

    Fires once per plugin when a ``Session`` loads its plugins. Call
    ``registry.add_source(cls)`` / ``registry.add_sink(cls)``; a format name that another
    distribution already registered for the same role is an error naming both.
    """


@hookspec
def microbatch_query_started(event: QueryStartedEvent) -> None:
    """A query started. Fires once per run, on the caller's thread, before ``start()`` returns."""


@hookspec
def microbatch_query_progress(progress: StreamingQueryProgress) -> None:
    """A batch completed (or an idle trigger was recorded). Fires on the query's thread after
    each recorded progress; keep it quick. Exceptions are logged and never stop the query."""


@hookspec
def microbatch_query_terminated(event: QueryTerminatedEvent) -> None:
    """A query ended: stopped, finished (once/available-now) or failed (``event.exception``).
    Fires once per run, on the query's thread."""


@hookspec
def microbatch_batch_phase(query_id: str, batch_id: int, phase: str) -> None:
    """A batch reached a step of the write-ahead protocol. Fires on the query's thread, except
    ``"sink_write_done"``, which fires on the thread that wrote the part.

    ``phase`` is one of ``"offsets_written"`` (the offset log entry is durable, no side effect
    yet), ``"sink_write_done"`` (one part was written, before the sink's commit),
    ``"sink_committed"`` (the sink committed, before the commit log entry) and
    ``"batch_committed"``. Meant for instrumentation and for crash tests: an exception raised
    here fails the batch exactly as a crash at that step would (it is re-run on restart).
    """
