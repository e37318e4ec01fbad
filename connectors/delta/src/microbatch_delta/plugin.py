"""Registers the ``delta`` source and sink with microbatch."""

from __future__ import annotations

from microbatch import Registrar, hookimpl

__all__ = ["microbatch_register_connectors"]


@hookimpl
def microbatch_register_connectors(registry: Registrar) -> None:
    from .sink import DeltaSink
    from .source import DeltaSource

    registry.add_source(DeltaSource)
    registry.add_sink(DeltaSink)
