"""The ``console`` sink for microbatch: prints each batch as a table."""

from __future__ import annotations

from ._render import show_string
from .console import ConsoleSink, ConsoleWriter

__all__ = ["ConsoleSink", "ConsoleWriter", "show_string"]
__version__ = "0.1.0"
