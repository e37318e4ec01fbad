"""``frame.write_stream``: configure a sink and a trigger, then :meth:`DataStreamWriter.start`."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ._redact import describe_error
from .checkpoint import Checkpoint
from .connector import OutputMode, Sink, SinkContext
from .engine import EngineSettings, MicroBatchEngine
from .errors import CheckpointError, ConfigurationError, UnsupportedOperationError
from .options import normalize, redact_error, scrub
from .query import StreamingQuery
from .triggers import Default, Trigger

if TYPE_CHECKING:
    from .frame import StreamFrame

__all__ = ["DataStreamWriter", "check_sink_supports"]

log = logging.getLogger("microbatch.writer")


def check_sink_supports(
    sink_class: type[Sink], output_mode: OutputMode | str, partition_by: tuple[str, ...] = ()
) -> None:
    """Raise :class:`UnsupportedOperationError` when the sink cannot take this output mode or
    a ``partition_by``."""
    mode = OutputMode.parse(output_mode)
    name = sink_class.format_name
    if mode not in sink_class.output_modes:
        accepted = ", ".join(sorted(m.value for m in sink_class.output_modes))
        raise UnsupportedOperationError(
            f"Invalid streaming output mode: {mode.value}. This output mode is not supported by "
            f"sink '{name}' (it supports: {accepted})."
        )
    if partition_by and not sink_class.supports_partition_by:
        raise UnsupportedOperationError(f"'{name}' does not support partitioning (partition_by)")


class DataStreamWriter:
    """Where and how a :class:`StreamFrame` is written. Every setter returns the writer."""

    def __init__(self, frame: StreamFrame) -> None:
        self._frame = frame
        self._format: str | None = None
        self._options: dict[str, Any] = {}
        self._output_mode = OutputMode.APPEND
        self._name: str | None = None
        self._trigger: Trigger = Default()
        self._partition_by: tuple[str, ...] = ()

    def format(self, name: str) -> DataStreamWriter:
        self._format = name
        return self

    def option(self, key: str, value: Any) -> DataStreamWriter:
        """A sink option, or ``checkpointLocation``."""
        self._options[key] = value
        return self

    def options(self, **options: Any) -> DataStreamWriter:
        self._options.update(options)
        return self

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
        """Validate everything, take the checkpoint, and start the query on its own thread.

        Wrong input (format, options, output mode, checkpoint) raises here, before any data
        moves and without changing the checkpoint.
        """
        session = self._frame.session
        if self._format is None:
            raise ConfigurationError("No sink format given: call .format(name) before .start()")
        info = session.registry.find("sink", self._format)
        sink_class: Any = info.cls
        check_sink_supports(sink_class, self._output_mode, self._partition_by)
        if self._output_mode == OutputMode.COMPLETE:  # Spark's check: no query aggregates yet
            raise UnsupportedOperationError(
                "Complete output mode not supported when there are no streaming aggregations "
                "on streaming DataFrames/Datasets; use append or update"
            )
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
        session.streams._check_name(self._name)
        location, temporary = self._checkpoint_location(location, sink_class)
        checkpoint = Checkpoint(
            location,
            retain=session.conf.get("minBatchesToRetain"),
            fsync=session.conf.get("checkpointFsync"),
            session_conf=session.conf.fixed_per_checkpoint(),
        )
        checkpoint.metadata()  # a corrupted metadata file fails here, before anything is written
        run_id = str(uuid.uuid4())
        checkpoint.acquire(run_id)
        try:
            checkpoint.sweep_temporary()
            return self._launch(checkpoint, run_id, info.format_name, sink_options, temporary)
        except BaseException as error:
            checkpoint.release()
            if temporary:
                shutil.rmtree(location, ignore_errors=True)
            failure = redact_error(
                error,
                self._frame.source_spec.options.secret_values() + sink_options.secret_values(),
            )
            if failure is error:
                raise
        # A redacted copy is raised outside the except block: inside it, Python would link the
        # unredacted original as the copy's __context__.
        raise failure

    def _checkpoint_location(self, given: Any, sink_class: Any) -> tuple[str, bool]:
        """Where the checkpoint lives, and whether it is a temporary one."""
        if given is not None:
            return str(given), False
        root = self._frame.session.conf.get("checkpointLocation")
        if root:
            return f"{str(root).rstrip('/')}/{self._name or uuid.uuid4()}", False
        if not sink_class.needs_checkpoint:
            return tempfile.mkdtemp(prefix="microbatch-temporary-"), True
        raise CheckpointError(
            f"Sink '{sink_class.format_name}' needs a checkpoint: set "
            '.option("checkpointLocation", ...) on write_stream, or '
            'session.conf.set("checkpointLocation", ...)'
        )

    def _launch(
        self,
        checkpoint: Checkpoint,
        run_id: str,
        sink_format: str,
        sink_options: Any,
        temporary: bool,
    ) -> StreamingQuery:
        frame, session = self._frame, self._frame.session
        spec = frame.source_spec
        wake_target: list[MicroBatchEngine] = []
        source = spec.build(
            session,
            state=checkpoint.source_state(0),
            wake=lambda: wake_target[0].wake.set() if wake_target else None,
        )
        parts: list[Any] = [source]
        secrets = spec.options.secret_values() + sink_options.secret_values()

        def on_end(failed: bool) -> None:
            for part in parts:
                try:
                    part.stop()
                except Exception as error:
                    log.error(
                        "stopping %s failed (ignored): %s",
                        scrub(part.describe(), secrets),
                        describe_error(error, secrets),
                    )
            checkpoint.release()
            if temporary and (not failed or session.conf.get("forceDeleteTempCheckpointLocation")):
                shutil.rmtree(checkpoint.url, ignore_errors=True)

        try:
            output_schema = frame.pipeline.output_schema(source.schema)
            missing = [c for c in self._partition_by if c not in output_schema.names]
            if missing:
                raise ConfigurationError(
                    f"partition_by columns {missing} are not in the output: {output_schema.names}"
                )
            if not type(source).replayable:
                log.warning(
                    "source '%s' is not replayable: a restart cannot re-read its data, so this "
                    "query gives no exactly-once guarantee (data may be lost on failure)",
                    spec.format_name,
                )
            sink_class: Any = session.registry.find("sink", sink_format).cls
            metadata = checkpoint.open(
                source=spec.format_name,
                sink=sink_format,
                identity={
                    "source": type(source).identity(spec.options),
                    "sink": sink_class.identity(sink_options),
                },
            )
            checkpoint.check_logs()
            query_id = metadata["id"]
            sink: Sink = sink_class(
                SinkContext(
                    options=sink_options,
                    schema=output_schema,
                    output_mode=self._output_mode,
                    query_id=query_id,
                    query_name=self._name,
                    partition_by=self._partition_by,
                    state=checkpoint.sink_state(),
                    session=session,
                    checkpoint_is_temporary=temporary,
                    last_committed_batch_id=checkpoint.last_committed_batch_id(),
                )
            )
            parts.append(sink)
            query = StreamingQuery(
                query_id=query_id,
                name=self._name,
                manager=session.streams,
                explain_lines=self._explain(source, sink, sink_options),
                secrets=secrets,
                on_end=on_end,
            )
            query.run_id = run_id
            query._stop_timeout = session.conf.get("stopTimeout").total_seconds()
            engine = self._engine(source, sink, output_schema, checkpoint, query)
            wake_target.append(engine)
            engine.recover()
            checkpoint.record_metadata()
        except BaseException:
            for part in parts:
                part.stop()
            raise
        query._launch(engine)
        return query

    def _engine(
        self,
        source: Any,
        sink: Sink,
        output_schema: pa.Schema,
        checkpoint: Checkpoint,
        query: StreamingQuery,
    ) -> MicroBatchEngine:
        conf = self._frame.session.conf
        phase_hook = self._frame.session.registry.plugin_manager.hook.microbatch_batch_phase
        query_id = query.id

        def phase(batch_id: int, step: str) -> None:
            phase_hook(query_id=query_id, batch_id=batch_id, phase=step)

        return MicroBatchEngine(
            source=source,
            sink=sink,
            pipeline=self._frame.pipeline,
            output_schema=output_schema,
            checkpoint=checkpoint,
            trigger=self._trigger,
            identity={"id": query.id, "runId": query.run_id, "name": self._name},
            settings=EngineSettings(
                polling_delay=conf.get("pollingDelay").total_seconds(),
                idle_progress_interval=conf.get("noDataProgressEventInterval").total_seconds(),
                max_workers=conf.get("maxReadThreads") or os.cpu_count() or 1,
                secrets=tuple(query._secrets),
            ),
            report=query._record,
            report_idle=query._record_idle,
            set_status=query._set_status,
            phase=phase if phase_hook.get_hookimpls() else _no_phase,
        )

    def _explain(self, source: Any, sink: Sink, sink_options: Any) -> list[str]:
        spec = self._frame.source_spec
        lines = [f"Source: {source.describe()}"]
        lines += [f"    option {k}={v}" for k, v in spec.options.redacted().items()]
        lines += [f"  {line}" for line in self._frame.pipeline.explain_lines()]
        lines.append(f"Sink: {sink.describe()} (output mode {self._output_mode.value})")
        lines += [f"    option {k}={v}" for k, v in sink_options.redacted().items()]
        lines.append(f"Trigger: {self._trigger!r}")
        return lines


def _no_phase(batch_id: int, phase: str) -> None:
    """Stands in for the phase hook when no plugin implements it (keeps the hot path short)."""


def _pop(raw: dict[str, Any], name: str) -> Any:
    """Remove ``name`` from ``raw`` under any spelling and return its value."""

    for key in list(raw):
        if normalize(key) == normalize(name):
            return raw.pop(key)
    return None
