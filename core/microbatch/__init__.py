"""microbatch: Structured-Streaming-style micro-batch pipelines in one Python process.

Start with :class:`Session`::

    import microbatch as mb

    session = mb.Session()
    frame = session.read_stream.format("rate").option("rowsPerSecond", 50).load()
    query = frame.write_stream.format("console").start()
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .batch_log import BatchLog
from .connector import (
    BatchSink,
    Guarantee,
    Offset,
    OutputMode,
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxFiles,
    ReadMaxRows,
    Sink,
    SinkContext,
    Source,
    SourceContext,
)
from .errors import (
    ConfigurationError,
    MalformedJsonError,
    MicrobatchError,
    OptionError,
    StreamingQueryException,
    UnknownFormatError,
)
from .hookspecs import hookimpl
from .options import (
    AtLeastOneOf,
    AtMostOneOf,
    ExactlyOneOf,
    Option,
    Options,
    OptionSpec,
    Requires,
    Rule,
)
from .state import StateStore

if TYPE_CHECKING:
    from .frame import StreamFrame
    from .json_decoder import JsonDecoder
    from .progress import StreamingQueryListener, StreamingQueryProgress
    from .query import StreamingQuery, StreamingQueryManager
    from .session import Session
    from .transforms import Pipeline
    from .triggers import Trigger
    from .types import parse_ddl

__version__ = "0.1.0"

# Heavier modules load on first use, so that `microbatch connectors` starts quickly.
_LAZY = {
    "Session": "session",
    "StreamFrame": "frame",
    "StreamingQuery": "query",
    "StreamingQueryManager": "query",
    "StreamingQueryListener": "progress",
    "StreamingQueryProgress": "progress",
    "Trigger": "triggers",
    "JsonDecoder": "json_decoder",
    "Pipeline": "transforms",
    "parse_ddl": "types",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'microbatch' has no attribute {name!r}")
    return getattr(importlib.import_module(f".{module}", __name__), name)


def col(name: str) -> Any:
    """A column reference for expressions: ``mb.col("value") >= 10`` (``pyarrow.compute.field``)."""
    import pyarrow.compute as pc

    return pc.field(name)


def lit(value: Any) -> Any:
    """A literal for expressions (``pyarrow.compute.scalar``)."""
    import pyarrow.compute as pc

    return pc.scalar(value)


__all__ = [
    "AtLeastOneOf",
    "AtMostOneOf",
    "BatchLog",
    "BatchSink",
    "ConfigurationError",
    "ExactlyOneOf",
    "Guarantee",
    "JsonDecoder",
    "MalformedJsonError",
    "MicrobatchError",
    "Offset",
    "Option",
    "OptionError",
    "OptionSpec",
    "Options",
    "OutputMode",
    "Pipeline",
    "ReadAllAvailable",
    "ReadLimit",
    "ReadMaxBytes",
    "ReadMaxFiles",
    "ReadMaxRows",
    "Requires",
    "Rule",
    "Session",
    "Sink",
    "SinkContext",
    "Source",
    "SourceContext",
    "StateStore",
    "StreamFrame",
    "StreamingQuery",
    "StreamingQueryException",
    "StreamingQueryListener",
    "StreamingQueryManager",
    "StreamingQueryProgress",
    "Trigger",
    "UnknownFormatError",
    "col",
    "hookimpl",
    "lit",
    "parse_ddl",
]
