"""Starting a planned query: take its checkpoint, make its reader and writer, launch the engine."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._checkpoint import Checkpoint
from ._engine import EngineJob, EngineSettings, MicroBatchEngine
from ._query import StreamingQuery
from ._redact import describe_error
from ._transforms import Pipeline
from ._triggers import Trigger
from .connector import StreamReader, StreamWriter, WriteContext
from .errors import CheckpointError, UnsupportedOperationError
from .options import redact_error, scrub
from .planner import QueryPlan

if TYPE_CHECKING:
    from ._session import Session

__all__ = ["QuerySettings", "start_query"]

log = logging.getLogger("microbatch.writer")


@dataclass(frozen=True)
class QuerySettings:
    """What the builder knows besides the plan."""

    name: str | None
    trigger: Trigger
    checkpoint_location: Any


def start_query(session: Session, plan: QueryPlan, settings: QuerySettings) -> StreamingQuery:
    """Take the checkpoint and start ``plan`` on its own thread.

    Wrong input (checkpoint, identity) raises here, before any data moves and without changing
    the checkpoint.
    """
    if len(plan.sources()) != 1 or plan.stateful_operators():
        raise UnsupportedOperationError(
            "This query needs several sources or a stateful operator, which the engine does "
            "not run yet"
        )
    sink_class: Any = plan.sink.sink_class
    session.streams._check_name(settings.name)
    location, temporary = _checkpoint_location(session, settings, sink_class)
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
        return _launch(session, plan, settings, checkpoint, run_id, temporary)
    except BaseException as error:
        checkpoint.release()
        if temporary:
            shutil.rmtree(location, ignore_errors=True)
        failure = redact_error(error, _secret_values(plan))  # no local holds the secrets
        if failure is error:
            raise
    # A redacted copy is raised outside the except block: inside it, Python would link the
    # unredacted original as the copy's __context__.
    raise failure


def _secret_values(plan: QueryPlan) -> list[str]:
    """The values of the secret options of the plan's source and sink."""
    return plan.sources()[0].spec.options.secret_values() + plan.sink.options.secret_values()


def _checkpoint_location(
    session: Session, settings: QuerySettings, sink_class: Any
) -> tuple[str, bool]:
    """Where the checkpoint lives, and whether it is a temporary one."""
    if settings.checkpoint_location is not None:
        return str(settings.checkpoint_location), False
    root = session.conf.get("checkpointLocation")
    if root:
        return f"{str(root).rstrip('/')}/{settings.name or uuid.uuid4()}", False
    if not sink_class.capabilities.needs_checkpoint:
        return tempfile.mkdtemp(prefix="microbatch-temporary-"), True
    raise CheckpointError(
        f"Sink '{sink_class.format_name}' needs a checkpoint: set "
        '.option("checkpointLocation", ...) on write_stream, or '
        'session.conf.set("checkpointLocation", ...)'
    )


def _launch(
    session: Session,
    plan: QueryPlan,
    settings: QuerySettings,
    checkpoint: Checkpoint,
    run_id: str,
    temporary: bool,
) -> StreamingQuery:
    source_node = plan.sources()[0]
    spec, sink_node = source_node.spec, plan.sink
    sink_class: Any = sink_node.sink_class
    secrets = _secret_values(plan)
    parts: list[StreamReader | StreamWriter] = []

    def on_end(failed: bool) -> None:
        for part in parts:
            try:
                part.stop()
            except Exception as error:
                log.error(
                    "stopping %s failed (ignored): %s",
                    scrub(type(part).__qualname__, secrets),
                    describe_error(error, secrets),
                )
        checkpoint.release()
        if temporary and (not failed or session.conf.get("forceDeleteTempCheckpointLocation")):
            shutil.rmtree(checkpoint.url, ignore_errors=True)

    try:
        if not type(spec.source).capabilities.replayable:
            log.warning(
                "source '%s' is not replayable: a restart cannot re-read its data, so this "
                "query gives no exactly-once guarantee (data may be lost on failure)",
                spec.format_name,
            )
        metadata = checkpoint.open(
            source=spec.format_name,
            sink=sink_node.info.format_name,
            identity={
                "source": type(spec.source).identity(spec.options),
                "sink": sink_class.identity(sink_node.options),
            },
        )
        checkpoint.check_logs()
        query_id = metadata["id"]
        wake_target: list[MicroBatchEngine] = []
        reader = spec.stream_reader(
            state=checkpoint.source_state(source_node.index),
            wake=lambda: wake_target[0].wake.set() if wake_target else None,
            query_id=query_id,
        )
        parts.append(reader)
        sink = sink_class(sink_node.options, session=session)
        writer = sink.stream_writer(
            WriteContext(
                schema=plan.output_schema,
                output_mode=sink_node.output_mode,
                query_id=query_id,
                query_name=settings.name,
                partition_by=sink_node.partition_by,
                state=checkpoint.sink_state(),
                session=session,
                checkpoint_is_temporary=temporary,
                last_committed_batch_id=checkpoint.last_committed_batch_id(),
            )
        )
        parts.append(writer)
        query = StreamingQuery(
            query_id=query_id,
            name=settings.name,
            manager=session.streams,
            explain_lines=_explain(plan, sink, settings),
            secrets=secrets,
            on_end=on_end,
        )
        query.run_id = run_id
        query._stop_timeout = session.conf.get("stopTimeout").total_seconds()
        job = EngineJob(
            source=spec.source,
            reader=reader,
            source_schema=spec.schema,
            sink=sink,
            writer=writer,
            query_id=query_id,
            pipeline=Pipeline(tuple(plan.transforms())),
            output_schema=plan.output_schema,
            checkpoint=checkpoint,
            trigger=settings.trigger,
            identity={"id": query.id, "runId": query.run_id, "name": settings.name},
            report=query._record,
            report_idle=query._record_idle,
            set_status=query._set_status,
            phase=_phase_hook(session, query_id),
        )
        engine = MicroBatchEngine(job, _engine_settings(session, query))
        wake_target.append(engine)
        engine.recover()
        checkpoint.record_metadata()
    except BaseException:
        for part in parts:
            part.stop()
        raise
    query._launch(engine)
    return query


def _engine_settings(session: Session, query: StreamingQuery) -> EngineSettings:
    conf = session.conf
    return EngineSettings(
        polling_delay=conf.get("pollingDelay").total_seconds(),
        idle_progress_interval=conf.get("noDataProgressEventInterval").total_seconds(),
        max_workers=conf.get("maxReadThreads") or os.cpu_count() or 1,
        max_batch_retries=conf.get("maxBatchRetries"),
        retry_backoff=conf.get("batchRetryBackoff").total_seconds(),
        secrets=tuple(query._secrets),
    )


def _phase_hook(session: Session, query_id: str) -> Any:
    hook = session.registry.plugin_manager.hook.microbatch_batch_phase
    if not hook.get_hookimpls():
        return _no_phase

    def phase(batch_id: int, step: str) -> None:
        hook(query_id=query_id, batch_id=batch_id, phase=step)

    return phase


def _no_phase(batch_id: int, phase: str) -> None:
    """Stands in for the phase hook when no plugin implements it (keeps the hot path short)."""


def _explain(plan: QueryPlan, sink: Any, settings: QuerySettings) -> list[str]:
    spec = plan.sources()[0].spec
    lines = [f"Source: {spec.source.describe()}"]
    lines += [f"    option {k}={v}" for k, v in spec.options.redacted().items()]
    lines += [f"  {step.describe()}" for step in plan.transforms()]
    lines.append(f"Sink: {sink.describe()} (output mode {plan.sink.output_mode.value})")
    lines += [f"    option {k}={v}" for k, v in plan.sink.options.redacted().items()]
    lines.append(f"Trigger: {settings.trigger!r}")
    return lines
