"""A source reading lines of text from a TCP server: ``socket``."""

from __future__ import annotations

from .source import SocketSource, SocketSplit, SocketSplitReader, SocketStreamReader

__all__ = ["SocketSource", "SocketSplit", "SocketSplitReader", "SocketStreamReader"]
__version__ = "0.1.0"
