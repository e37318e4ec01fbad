"""Registers the ``memory`` source and sink with microbatch."""

from __future__ import annotations

from typing import TYPE_CHECKING

from microbatch import hookimpl

if TYPE_CHECKING:
    from microbatch import Registrar


@hookimpl
def microbatch_register_connectors(registry: Registrar) -> None:
    from .sink import MemorySink
    from .stream import MemoryStreamSource

    registry.add_source(MemoryStreamSource)
    registry.add_sink(MemorySink)
