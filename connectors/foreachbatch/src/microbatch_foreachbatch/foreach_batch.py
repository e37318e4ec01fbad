"""The ``foreachBatch`` sink: a user function called with each batch as one Arrow table."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import pyarrow as pa

import microbatch as mb
from microbatch.errors import ConfigurationError
from microbatch.ledger import query_scope
from microbatch.options import Options, OptionSpec

from ._callables import (
    USER_CODE_CAPABILITIES,
    check_arguments,
    describe_callable,
    user_code_option,
)

__all__ = ["ForeachBatchSink", "ForeachBatchWriter"]


class ForeachBatchSink(mb.Sink):
    """Calls ``function(batch, batch_id)`` once per executed batch.

    ``batch`` is a ``pyarrow.Table`` holding the whole batch (every row of every split, in
    split order; empty when the batch has no rows) and ``batch_id`` an ``int``. The return value
    is ignored. The parts of a batch are gathered by picklable part writers (they may run in
    another process); the function itself runs in the query's process, at commit, as Spark runs
    it on the driver. An exception raised by the function reaches the engine unchanged and
    stops the query; the batch is not committed and runs again, with the same id and the same
    rows, when the query restarts from its checkpoint. Delivery is therefore at-least-once: make
    the function skip batch ids it already applied (see :class:`microbatch.BatchLedger`).
    """

    format_name: ClassVar[str] = "foreachBatch"
    description: ClassVar[str] = "Calls a Python function(batch: pyarrow.Table, batch_id: int)."
    options: ClassVar[OptionSpec] = user_code_option(
        "function",
        doc="The callable function(batch: pyarrow.Table, batch_id: int) run for each batch; "
        "write_stream.foreach_batch(function) sets it.",
    )
    capabilities: ClassVar[mb.SinkCapabilities] = USER_CODE_CAPABILITIES

    def __init__(self, options: Options, *, session: Any = None) -> None:
        super().__init__(options, session=session)
        function = self.opts.function
        if not callable(function):
            raise ConfigurationError(
                "Option 'function' of the foreachBatch sink must be a callable "
                f"function(batch, batch_id), got {type(function).__name__}"
            )
        check_arguments(
            function,
            (None, 0),
            "The foreachBatch function",
            "function(batch, batch_id) with two positional arguments",
        )
        self.function: Callable[[pa.Table, int], Any] = function

    def stream_writer(self, context: mb.WriteContext) -> ForeachBatchWriter:
        return ForeachBatchWriter(context, self.function)

    def describe(self) -> str:
        return f"ForeachBatchSink[{describe_callable(self.function)}]"


class ForeachBatchWriter(mb.BatchWriter):
    """Calls the function with each whole batch at commit.

    The call runs inside :func:`microbatch.ledger.query_scope`, so a ``BatchLedger`` used by the
    function knows the query (its id, and whether its checkpoint is temporary).
    """

    def __init__(self, context: mb.WriteContext, function: Callable[[pa.Table, int], Any]) -> None:
        super().__init__(context)
        self.function = function

    def add_batch(self, table: pa.Table, batch_id: int) -> None:
        with query_scope(self.context):
            self.function(table, batch_id)
