"""Registers this distribution's connectors (entry point ``example`` in ``microbatch.connectors``).

Keep this module thin: import the connector classes inside the hook, so that listing the
installed connectors stays fast even when a connector needs a heavy client library.
"""

from __future__ import annotations

import microbatch as mb

__all__ = ["microbatch_register_connectors"]


@mb.hookimpl
def microbatch_register_connectors(registry: mb.Registrar) -> None:
    from .counter import CounterSource
    from .jsonl import JsonLinesSink

    registry.add_source(CounterSource)
    registry.add_sink(JsonLinesSink)
