"""The demo job behind ``make demo``: JSON event files stream into a Delta table, live.

It needs the ``microbatch-file`` and ``microbatch-delta`` connectors; the core itself runs
without them.
"""

from __future__ import annotations

from .demo import EVENT_SCHEMA, EventFileWriter, run_demo, start_pipeline

__version__ = "0.1.0"

__all__ = ["EVENT_SCHEMA", "EventFileWriter", "run_demo", "start_pipeline"]
