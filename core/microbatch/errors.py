"""Every error microbatch raises, in one tree.

::

    MicrobatchError
    ├── ConfigurationError            wrong input, found before anything runs (start()/load())
    │   ├── UnknownFormatError        no installed connector has that format name
    │   ├── OptionError               unknown option, wrong type or value, missing required one
    │   ├── SchemaError               a schema or DDL string that cannot be used
    │   ├── UnsupportedOperationError output mode, trigger or feature a connector does not support
    │   └── CheckpointError           a checkpoint that cannot be used
    │       ├── CheckpointInUseError  another active query holds it
    │       ├── CheckpointMismatchError  it belongs to a query with another source
    │       └── CorruptCheckpointError   one of its files cannot be read
    ├── PluginLoadError               a connector distribution failed to import or register
    ├── SchemaMismatchError           a source produced batches that differ from its schema
    ├── TransformError                a transform failed on a batch
    ├── MalformedJsonError            a malformed JSON record under FAILFAST (``record`` says
    │                                 which and why: microbatch.json_decoder)
    ├── SourceError / SinkError       a connector failed while reading or writing
    ├── StreamingQueryException       a query terminated with an error; ``cause`` holds it
    └── QueryStopTimeoutError         ``stop(timeout=...)`` ran out while a batch still ran
                                      (also a ``TimeoutError``)

Every message says what was wrong, where, and what to do about it.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

from ._redact import safe_str

__all__ = [
    "CheckpointError",
    "CheckpointInUseError",
    "CheckpointMismatchError",
    "ConfigurationError",
    "CorruptCheckpointError",
    "MalformedJsonError",
    "MicrobatchError",
    "OptionError",
    "PluginLoadError",
    "QueryStopTimeoutError",
    "SchemaError",
    "SchemaMismatchError",
    "SinkError",
    "SourceError",
    "StreamingQueryException",
    "TransformError",
    "UnknownFormatError",
    "UnsupportedOperationError",
    "cause_chain",
]


class MicrobatchError(Exception):
    """Base class of every error raised by microbatch."""


class ConfigurationError(MicrobatchError, ValueError):
    """Input that cannot work, detected before any data moves."""


class UnknownFormatError(ConfigurationError):
    """No installed connector provides the requested format."""


class OptionError(ConfigurationError):
    """One or more options are wrong; ``problems`` lists each of them."""

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.problems = problems or [message]


class SchemaError(ConfigurationError):
    """A schema or DDL string that cannot be used."""


class UnsupportedOperationError(ConfigurationError):
    """An output mode, trigger or feature that the chosen connector does not support."""


class CheckpointError(ConfigurationError):
    """A checkpoint location that cannot be used for this query."""


class CheckpointInUseError(CheckpointError):
    """Another active query holds the checkpoint."""


class CheckpointMismatchError(CheckpointError):
    """The checkpoint was written by a query with a different source or sink (another format,
    location or identity option)."""


class CorruptCheckpointError(CheckpointError):
    """A checkpoint file cannot be read or parsed."""


class PluginLoadError(MicrobatchError):
    """A connector distribution failed to import or register."""


class SchemaMismatchError(MicrobatchError):
    """Record batches whose schema differs from the declared one."""


class TransformError(MicrobatchError):
    """A transform failed on a batch."""


class MalformedJsonError(MicrobatchError, ValueError):
    """A malformed JSON record met by a :class:`~microbatch.json_decoder.JsonDecoder` in
    ``FAILFAST`` mode; ``record`` (a ``MalformedRecord``) holds its row, kind, column and
    message. Callers raise their own error from it, naming where the record came from."""

    def __init__(self, record: Any) -> None:
        where = f"line {record.line}" if record.line is not None else f"row {record.row}"
        super().__init__(
            f"[MALFORMED_RECORD_IN_PARSING] Malformed JSON record at {where} (parse mode "
            f"FAILFAST): {record.message}. Fix the data, or use mode PERMISSIVE (bad values "
            "become null) or DROPMALFORMED (bad records are dropped)."
        )
        self.record = record

    def __reduce__(self) -> Any:
        return (type(self), (self.record,))


class SourceError(MicrobatchError):
    """A source failed while planning or reading data."""


class SinkError(MicrobatchError):
    """A sink failed while writing or committing a batch."""


class StreamingQueryException(MicrobatchError):
    """A streaming query terminated with an error.

    ``cause`` is the error that ended the query, also linked as ``__cause__`` so that a printed
    traceback shows where it was raised; ``query_id`` and ``run_id`` identify the run. When the
    error (or anything in its chain) shows the value of a secret option, ``cause`` is a redacted
    copy of the same class instead of the original (see :mod:`microbatch._redact`).
    """

    def __init__(self, *, query_id: str, run_id: str, cause: BaseException) -> None:
        self.query_id = query_id
        self.run_id = run_id
        self.cause = cause
        super().__init__(
            f"Query [id = {query_id}, run_id = {run_id}] terminated with exception: "
            f"{type(cause).__name__}: {safe_str(cause)}"
        )
        self.__cause__ = cause

    def __reduce__(self) -> Any:
        # The default pickling calls the class with ``args``, which the keyword-only
        # ``__init__`` refuses: a query run in a worker process could not report its failure.
        rebuild = functools.partial(
            type(self), query_id=self.query_id, run_id=self.run_id, cause=self.cause
        )
        return (rebuild, (), {"args": self.args})


class QueryStopTimeoutError(MicrobatchError, TimeoutError):
    """``StreamingQuery.stop(timeout=...)`` returned before the query's thread ended.

    The stop request stands: the query stops once its running batch ends. ``query_id`` and
    ``run_id`` identify the run.
    """

    def __init__(self, message: str, *, query_id: str, run_id: str) -> None:
        super().__init__(message)
        self.query_id = query_id
        self.run_id = run_id

    def __reduce__(self) -> Any:
        rebuild = functools.partial(type(self), query_id=self.query_id, run_id=self.run_id)
        return (rebuild, tuple(self.args[:1]))


class RetriableError(MicrobatchError):
    """A failure that running the same batch again may cure (a broker restart, a deadlock, a
    timeout). Raise it, or raise another error ``from`` it, in a reader or writer.

    The engine then re-runs the whole batch (same batch id, same offsets) after a backoff, up
    to the session's ``maxBatchRetries`` times; any other error stops the query.
    """


def cause_chain(error: BaseException) -> Iterator[BaseException]:
    """``error``, then the error it was raised ``from``, and so on (each once, even in a cycle)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__
