"""Registers the ``console`` sink with microbatch."""

from __future__ import annotations

from microbatch import Registrar, hookimpl

from .console import ConsoleSink

__all__ = ["microbatch_register_connectors"]


@hookimpl
def microbatch_register_connectors(registry: Registrar) -> None:
    registry.add_sink(ConsoleSink)
