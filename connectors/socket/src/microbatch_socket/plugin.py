"""Registers the ``socket`` source with microbatch."""

from __future__ import annotations

from microbatch import Registrar, hookimpl

from .source import SocketSource

__all__ = ["microbatch_register_connectors"]


@hookimpl
def microbatch_register_connectors(registry: Registrar) -> None:
    registry.add_source(SocketSource)
