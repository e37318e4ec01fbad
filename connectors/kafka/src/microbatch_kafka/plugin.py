"""Registers the ``kafka`` source and sink with microbatch."""

from __future__ import annotations

from microbatch import Registrar, hookimpl

from .sink import KafkaSink
from .source import KafkaSource

__all__ = ["microbatch_register_connectors"]


@hookimpl
def microbatch_register_connectors(registry: Registrar) -> None:
    registry.add_source(KafkaSource)
    registry.add_sink(KafkaSink)
