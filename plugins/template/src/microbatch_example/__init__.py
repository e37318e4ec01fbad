"""An example microbatch connector distribution: copy it to start your own."""

from __future__ import annotations

from .counter import CounterSource
from .jsonl import JsonLinesSink, read_jsonl_folder

__version__ = "0.1.0"

__all__ = ["CounterSource", "JsonLinesSink", "read_jsonl_folder"]
