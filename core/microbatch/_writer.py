"""``frame.write_stream``: configure a sink and a trigger, then :meth:`DataStreamWriter.start`."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ._builder import FormatOptionsBuilder
from ._execution import QuerySettings, start_query
from ._query import StreamingQuery
from ._triggers import Default, Trigger
from .connector import OutputMode
from .errors import ConfigurationError
from .options import normalize
from .planner import check_sink_supports, plan_query

if TYPE_CHECKING:
    from ._frame import StreamFrame

__all__ = ["DataStreamWriter", "check_sink_supports"]


class DataStreamWriter(FormatOptionsBuilder):
    """Where and how a :class:`StreamFrame` is written. Every setter returns the writer."""

    def __init__(self, frame: StreamFrame) -> None:
        self._frame = frame
        self._format: str | None = None
        self._options: dict[str, Any] = {}
        self._output_mode = OutputMode.APPEND
        self._name: str | None = None
        self._trigger: Trigger = Default()
        self._partition_by: tuple[str, ...] = ()

    def output_mode(self, mode: str | OutputMode) -> DataStreamWriter:
        """``append`` (default), ``complete`` or ``update``."""
        self._output_mode = OutputMode.parse(mode)
        return self

    def query_name(self, name: str) -> DataStreamWriter:
        """The query's name (shown in progress; the table name of the memory sink)."""
        self._name = name
        return self

    def trigger(
        self,
        *,
        processing_time: str | timedelta | float | None = None,
        once: bool | None = None,
        available_now: bool | None = None,
        **unknown: Any,
    ) -> DataStreamWriter:
        """Exactly one of ``processing_time="1 second"``, ``once=True``, ``available_now=True``."""
        self._trigger = Trigger.of(
            processing_time=processing_time, once=once, available_now=available_now, **unknown
        )
        return self

    def partition_by(self, *columns: str) -> DataStreamWriter:
        self._partition_by = tuple(columns)
        return self

    def foreach_batch(self, function: Callable[[pa.Table, int], Any]) -> DataStreamWriter:
        """Call ``function(batch_table, batch_id)`` for every batch."""
        return self.format("foreachBatch").option("function", function)

    def foreach(self, writer: Any) -> DataStreamWriter:
        """Call ``writer`` per row: a function, or an object with ``process(row)`` and optional
        ``open(partition_id, epoch_id)`` / ``close(error)``."""
        return self.format("foreach").option("writer", writer)

    # -- start ----------------------------------------------------------------------------
    def start(self, path: str | None = None) -> StreamingQuery:
        """Plan and check the query, take the checkpoint, and start it on its own thread.

        Wrong input (format, options, output mode, an operation Spark refuses, checkpoint)
        raises here, before any data moves and without changing the checkpoint.
        """
        session = self._frame.session
        if self._format is None:
            raise ConfigurationError("No sink format given: call .format(name) before .start()")
        info = session.registry.find("sink", self._format)
        sink_class: Any = info.cls
        check_sink_supports(sink_class, self._output_mode, self._partition_by)
        raw = dict(self._options)
        location = _pop(raw, "checkpointLocation")
        if path is not None:
            if _pop(raw, "path") is not None:
                raise ConfigurationError(
                    "There is a 'path' option set and start() is called with a path: give the "
                    "path only once"
                )
            raw["path"] = path
        sink_options = sink_class.options.parse(raw, connector=info.format_name)
        del raw  # raw secret values: keep them out of this frame's locals in a traceback
        plan = plan_query(self._frame, info, sink_options, self._output_mode, self._partition_by)
        settings = QuerySettings(
            name=self._name, trigger=self._trigger, checkpoint_location=location
        )
        return start_query(session, plan, settings)


def _pop(raw: dict[str, Any], name: str) -> Any:
    """Remove ``name`` from ``raw`` under any spelling and return its value."""

    for key in list(raw):
        if normalize(key) == normalize(name):
            return raw.pop(key)
    return None
