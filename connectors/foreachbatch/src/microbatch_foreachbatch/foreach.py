"""The ``foreach`` sink: a user writer called for every row, one split ("partition") at a time."""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import pyarrow as pa

from microbatch.connector import Guarantee, OutputMode, Sink, SinkContext, current_part
from microbatch.errors import ConfigurationError
from microbatch.options import Option, OptionSpec

from ._callables import check_arguments, describe_callable

__all__ = ["ForeachSink"]

logger = logging.getLogger(__name__)

_USAGE = (
    "pass a function f(row) or an object with a process(row) method and optional "
    "open(partition_id, epoch_id) and close(error) methods"
)


class ForeachSink(Sink):
    """Hands every row, as a ``dict``, to a user writer.

    The writer is either a callable ``f(row)`` or an object with ``process(row)`` and optional
    ``open(partition_id, epoch_id) -> bool`` and ``close(error)``. For each split of a batch
    (Spark's partition) the sink calls ``open(partition_id, batch_id)``; when it returns a falsy
    value the split's rows are not processed. ``close(error)`` is called whenever ``open``
    returned (or there is no ``open``), with the exception ``process`` raised or ``None``; the
    exception is then re-raised and stops the query. When ``open`` raises, ``close`` is not
    called. Partition ids number the splits of one batch from 0, in the order their writes
    start (with parallel writes that need not be the order of the source's plan).

    Like Spark's per-task copy, each split works on a fresh ``copy.deepcopy`` of a writer
    object, so per-split state (a connection opened in ``open``) is never shared between splits
    running at once. A writer that cannot be deep-copied (it holds a lock, a socket or a
    connection) is used as it is, and must then be safe to call from several threads. A plain
    function is never copied. Rows reach the writer as they are written, before the batch
    commits: delivery is at-least-once.
    """

    format_name: ClassVar[str] = "foreach"
    description: ClassVar[str] = "Calls a Python writer for every row (process/open/close)."
    options: ClassVar[OptionSpec] = OptionSpec(
        Option(
            name="writer",
            type="object",
            required=True,
            doc="A function f(row) or an object with process(row) and optional "
            "open(partition_id, epoch_id) and close(error); write_stream.foreach(writer) sets it.",
        ),
    )
    output_modes: ClassVar[frozenset[OutputMode]] = frozenset(OutputMode)
    guarantee: ClassVar[Guarantee] = Guarantee.AT_LEAST_ONCE
    needs_checkpoint: ClassVar[bool] = False

    def __init__(self, context: SinkContext) -> None:
        super().__init__(context)
        self.writer: Any = self.opts.writer
        self._is_function = _validate(self.writer)
        self._warned_uncopyable = False

    def describe(self) -> str:
        return f"ForeachSink[{describe_callable(self.writer)}]"

    def write(self, batch_id: int, data: pa.RecordBatchReader) -> int:
        """Run the writer over one split; returns the number of rows processed."""
        partition_id = current_part()
        if self._is_function:
            return _process_rows(self.writer, _rows(data))
        return _run_writer(self._fresh_writer(), partition_id, batch_id, data)

    def commit(self, batch_id: int, messages: list[Any]) -> None:
        """Nothing to do: rows were handed to the writer as they were read."""

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
