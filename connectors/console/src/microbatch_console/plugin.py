"""Registers the ``console`` sink with microbatch."""

from __future__ import annotations

from microbatch import hookimpl
from microbatch.registry import ConnectorRegistry

from .console import ConsoleSink

__all__ = ["microbatch_register_connectors"]


@hookimpl
def microbatch_register_connectors(registry: ConnectorRegistry) -> None:
    registry.add_sink(ConsoleSink)
