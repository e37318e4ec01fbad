"""Registers the ``rate`` and ``rate-micro-batch`` sources with microbatch."""

from __future__ import annotations

from microbatch import Registrar, hookimpl

from .rate import RateSource
from .rate_micro_batch import RateMicroBatchSource

__all__ = ["microbatch_register_connectors"]


@hookimpl
def microbatch_register_connectors(registry: Registrar) -> None:
    registry.add_source(RateSource)
    registry.add_source(RateMicroBatchSource)
