"""Registers the ``jdbc`` source and sink with microbatch."""

from __future__ import annotations

from microbatch import Registrar, hookimpl

__all__ = ["microbatch_register_connectors"]


@hookimpl
def microbatch_register_connectors(registry: Registrar) -> None:
    from .sink import JdbcSink
    from .source import JdbcSource

    registry.add_source(JdbcSource)
    registry.add_sink(JdbcSink)
