"""The demo job behind ``make demo``: JSON event files stream into a parquet table, live.

It needs the ``microbatch-file`` connector; the core itself runs without it.
"""

from __future__ import annotations

from .demo import EVENT_SCHEMA, EventFileWriter, run_demo, start_pipeline

__version__ = "0.1.0"

__all__ = ["EVENT_SCHEMA", "EventFileWriter", "run_demo", "start_pipeline"]
