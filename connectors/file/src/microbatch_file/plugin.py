"""Registers the file sources (json, csv, text, parquet, orc) and sinks (json, csv, parquet)."""

from __future__ import annotations

from microbatch import Registrar, hookimpl

from .sinks import SINKS
from .sources import SOURCES

__all__ = ["microbatch_register_connectors"]


@hookimpl
def microbatch_register_connectors(registry: Registrar) -> None:
    for source in SOURCES:
        registry.add_source(source)
    for sink in SINKS:
        registry.add_sink(sink)
