"""Registers the ``socket`` source with microbatch."""

from __future__ import annotations

from microbatch import hookimpl
from microbatch.registry import ConnectorRegistry

from .source import SocketSource

__all__ = ["microbatch_register_connectors"]


@hookimpl
def microbatch_register_connectors(registry: ConnectorRegistry) -> None:
    registry.add_source(SocketSource)
