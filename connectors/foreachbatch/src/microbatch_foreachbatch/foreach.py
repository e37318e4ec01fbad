"""The ``foreach`` sink: a user writer called for every row, one split ("partition") at a time."""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar

import pyarrow as pa

import microbatch as mb
from microbatch.errors import ConfigurationError
from microbatch.options import Options, OptionSpec

from ._callables import (
    USER_CODE_CAPABILITIES,
    check_arguments,
    describe_callable,
    user_code_option,
)
from ._messages import RowsProcessed

__all__ = ["ForeachPartWriter", "ForeachSink", "ForeachWriter"]

logger = logging.getLogger(__name__)

_USAGE = (
    "pass a function f(row) or an object with a process(row) method and optional "
    "open(partition_id, epoch_id) and close(error) methods"
)


class ForeachSink(mb.Sink):
    """Hands every row, as a ``dict``, to a user writer.

    The writer is either a callable ``f(row)`` or an object with ``process(row)`` and optional
    ``open(partition_id, epoch_id) -> bool`` and ``close(error)``. For each split of a batch
    (Spark's partition) the part writer calls ``open(partition_id, batch_id)``, where
    ``partition_id`` is the split's index in the source's plan of the batch
    (``PartContext.part_index``); when it returns a falsy value the split's rows are not
    processed. ``close(error)`` is called whenever ``open`` returned (or there is no ``open``),
    with the exception ``process`` raised or ``None``; the exception is then re-raised and
    stops the query. When ``open`` raises, ``close`` is not called.

    The part writer (:class:`ForeachPartWriter`) holds the user's writer and pickles with it,
    as Spark pickles the writer to its executors: to run splits in another process, the writer
    must pickle (a module-level function, or an instance of a module-level class that opens
    its connections in ``open``). Like Spark's per-task copy, each split works on a fresh
    ``copy.deepcopy`` of a writer object, so per-split state (a connection opened in ``open``)
    is never shared between splits running at once. A writer that cannot be deep-copied (it
    holds a lock, a socket or a connection) is used as it is, and must then be safe to call
    from several threads. A plain function is never copied. Rows reach the writer as they are
    written, before the batch commits: delivery is at-least-once.
    """

    format_name: ClassVar[str] = "foreach"
    description: ClassVar[str] = "Calls a Python writer for every row (process/open/close)."
    options: ClassVar[OptionSpec] = user_code_option(
        "writer",
        doc="A function f(row) or an object with process(row) and optional "
        "open(partition_id, epoch_id) and close(error); write_stream.foreach(writer) sets it.",
    )
    capabilities: ClassVar[mb.SinkCapabilities] = USER_CODE_CAPABILITIES

    def __init__(self, options: Options, *, session: Any = None) -> None:
        super().__init__(options, session=session)
        self.writer: Any = self.opts.writer
        self.is_function = _validate(self.writer)
        """True when the writer is a plain callable ``f(row)``."""

    def describe(self) -> str:
        return f"ForeachSink[{describe_callable(self.writer)}]"

    def stream_writer(self, context: mb.WriteContext) -> ForeachWriter:
        return ForeachWriter(ForeachPartWriter(self.writer, is_function=self.is_function))


class ForeachPartWriter(mb.PartWriter):
    """Runs the user's writer over one split (Spark's open / process / close per partition).

    It pickles when the user's writer does; one instance serves every batch of a run, so the
    warning about a writer that cannot be copied is logged once per run (per process).
    """

    def __init__(self, writer: Any, *, is_function: bool) -> None:
        self.writer = writer
        self.is_function = is_function
        self._warned_uncopyable = False

    def write(self, data: pa.RecordBatchReader, part: mb.PartContext) -> RowsProcessed:
        """Hand the split's rows to the writer; the message holds the number processed."""
        if self.is_function:
            return RowsProcessed(_process_rows(self.writer, _rows(data)))
        writer = self._fresh_writer()
        return RowsProcessed(_run_writer(writer, part.part_index, part.batch_id, data))

    def _fresh_writer(self) -> Any:
        try:
            return copy.deepcopy(self.writer)
        except Exception as error:  # any failure to copy: fall back to the shared object
            if not self._warned_uncopyable:
                self._warned_uncopyable = True
                logger.warning(
                    "The foreach writer %s cannot be copied (%s: %s); every split uses the "
                    "same object, which must be thread-safe.",
                    describe_callable(self.writer),
                    type(error).__name__,
                    error,
                )
            return self.writer


class ForeachWriter(mb.StreamWriter):
    """Hands out the run's part writer; commits nothing (rows were handed on as written)."""

    def __init__(self, part_writer: ForeachPartWriter) -> None:
        self._part_writer = part_writer

    def part_writer(self) -> ForeachPartWriter:
        return self._part_writer

    def commit(self, messages: Sequence[mb.CommitMessage | None], batch_id: int) -> None:
        """Nothing to do: rows were handed to the writer as they were read."""


def _validate(writer: Any) -> bool:
    """Check ``writer``; True when it is a plain callable ``f(row)``."""
    if callable(writer):
        check_arguments(writer, (None,), "The foreach function", "f(row)")
        return True
    process = getattr(writer, "process", None)
    if process is None:
        raise ConfigurationError(
            f"The foreach writer {type(writer).__name__} has no 'process' method: {_USAGE}"
        )
    checks: list[tuple[str, tuple[Any, ...], str]] = [
        ("process", (None,), "process(row)"),
        ("open", (0, 0), "open(partition_id, epoch_id)"),
        ("close", (None,), "close(error)"),
    ]
    for name, arguments, usage in checks:
        if not hasattr(writer, name):
            continue
        method = getattr(writer, name)
        if not callable(method):
            raise ConfigurationError(
                f"Attribute '{name}' of the foreach writer {type(writer).__name__} is not "
                f"callable: {_USAGE}"
            )
        check_arguments(method, arguments, "The foreach writer method", usage)
    return False


def _rows(data: pa.RecordBatchReader) -> Iterator[dict[str, Any]]:
    for batch in data:
        yield from batch.to_pylist()


def _process_rows(process: Callable[[Any], Any], rows: Iterator[dict[str, Any]]) -> int:
    count = 0
    for row in rows:
        process(row)
        count += 1
    return count


def _run_writer(writer: Any, partition_id: int, batch_id: int, data: pa.RecordBatchReader) -> int:
    """Spark's open / process / close protocol for one partition."""
    opener = getattr(writer, "open", None)
    closer = getattr(writer, "close", None)
    should_process = opener(partition_id, batch_id) if opener is not None else True
    error: Exception | None = None
    try:
        return _process_rows(writer.process, _rows(data)) if should_process else 0
    except Exception as raised:
        error = raised
        raise
    finally:
        if closer is not None:
            closer(error)
