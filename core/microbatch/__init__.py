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

from ._registry import Registrar
from .batch_log import BatchLog
from .connector import (
    BatchWriter,
    CommitMessage,
    Guarantee,
    Offset,
    OutputMode,
    PartContext,
    PartWriter,
    ReadAllAvailable,
    ReadContext,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxFiles,
    ReadMaxRows,
    Sink,
    SinkCapabilities,
    Source,
    SourceCapabilities,
    Split,
    SplitReader,
    StreamReader,
    StreamWriter,
    TableMessage,
    WriteContext,
)
from .errors import (
    CheckpointError,
    CheckpointInUseError,
    CheckpointMismatchError,
    ConfigurationError,
    CorruptCheckpointError,
    MalformedJsonError,
    MicrobatchError,
    OptionError,
    PluginLoadError,
    QueryStopTimeoutError,
    RetriableError,
    SchemaError,
    SchemaMismatchError,
    SinkError,
    SourceError,
    StreamingQueryException,
    TransformError,
    UnknownFormatError,
    UnsupportedOperationError,
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
    from ._frame import StreamFrame
    from ._query import StreamingQuery, StreamingQueryManager
    from ._session import Session
    from ._transforms import Pipeline
    from ._triggers import Trigger
    from .json_decoder import JsonDecoder
    from .ledger import BatchLedger
    from .progress import StreamingQueryListener, StreamingQueryProgress
    from .types import parse_ddl

__version__ = "0.1.0"

# Heavier modules load on first use, so that `microbatch connectors` starts quickly.
_LAZY = {
    "BatchLedger": "ledger",
    "Session": "_session",
    "StreamFrame": "_frame",
    "StreamingQuery": "_query",
    "StreamingQueryManager": "_query",
    "StreamingQueryListener": "progress",
    "StreamingQueryProgress": "progress",
    "Trigger": "_triggers",
    "JsonDecoder": "json_decoder",
    "Pipeline": "_transforms",
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
    "BatchLedger",
    "BatchLog",
    "BatchWriter",
    "CheckpointError",
    "CheckpointInUseError",
    "CheckpointMismatchError",
    "CommitMessage",
    "ConfigurationError",
    "CorruptCheckpointError",
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
    "PartContext",
    "PartWriter",
    "Pipeline",
    "PluginLoadError",
    "QueryStopTimeoutError",
    "ReadAllAvailable",
    "ReadContext",
    "ReadLimit",
    "ReadMaxBytes",
    "ReadMaxFiles",
    "ReadMaxRows",
    "Registrar",
    "Requires",
    "RetriableError",
    "Rule",
    "SchemaError",
    "SchemaMismatchError",
    "Session",
    "Sink",
    "SinkCapabilities",
    "SinkError",
    "Source",
    "SourceCapabilities",
    "SourceError",
    "Split",
    "SplitReader",
    "StateStore",
    "StreamFrame",
    "StreamReader",
    "StreamWriter",
    "StreamingQuery",
    "StreamingQueryException",
    "StreamingQueryListener",
    "StreamingQueryManager",
    "StreamingQueryProgress",
    "TableMessage",
    "TransformError",
    "Trigger",
    "UnknownFormatError",
    "UnsupportedOperationError",
    "WriteContext",
    "col",
    "hookimpl",
    "lit",
    "parse_ddl",
]
