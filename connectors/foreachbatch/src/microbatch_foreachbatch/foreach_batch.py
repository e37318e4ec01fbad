"""The ``foreachBatch`` sink: a user function called with each batch as one Arrow table."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import pyarrow as pa

from microbatch.connector import BatchSink, Guarantee, OutputMode, SinkContext
from microbatch.errors import ConfigurationError
from microbatch.options import Option, OptionSpec

from ._callables import check_arguments, describe_callable
from .ledger import sink_call

__all__ = ["ForeachBatchSink"]


class ForeachBatchSink(BatchSink):
    """Calls ``function(batch, batch_id)`` once per executed batch.

    ``batch`` is a ``pyarrow.Table`` holding the whole batch (every row of every split, in
    split order; empty when the batch has no rows) and ``batch_id`` an ``int``. The return value
    is ignored. An exception raised by the function reaches the engine unchanged and stops the
    query; the batch is not committed and runs again, with the same id and the same rows, when
    the query restarts from its checkpoint. Delivery is therefore at-least-once: make the
    function skip batch ids it already applied (see ``microbatch_foreachbatch.ledger``).
    """

    format_name: ClassVar[str] = "foreachBatch"
    description: ClassVar[str] = "Calls a Python function(batch: pyarrow.Table, batch_id: int)."
    options: ClassVar[OptionSpec] = OptionSpec(
        Option(
            name="function",
            type="object",
            required=True,
            doc="The callable function(batch: pyarrow.Table, batch_id: int) run for each batch; "
            "write_stream.foreach_batch(function) sets it.",
        ),
    )
    output_modes: ClassVar[frozenset[OutputMode]] = frozenset(OutputMode)
    guarantee: ClassVar[Guarantee] = Guarantee.AT_LEAST_ONCE
    needs_checkpoint: ClassVar[bool] = False

    def __init__(self, context: SinkContext) -> None:
        super().__init__(context)
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

    def add_batch(self, batch_id: int, table: pa.Table) -> None:
        with sink_call(self.context):
            self.function(table, batch_id)

    def describe(self) -> str:
        return f"ForeachBatchSink[{describe_callable(self.function)}]"
