"""Running queries: :class:`StreamingQuery` and the session's :class:`StreamingQueryManager`."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ._redact import redactor
from .errors import ConfigurationError, QueryStopTimeoutError, StreamingQueryException
from .progress import (
    QueryIdleEvent,
    QueryStartedEvent,
    QueryTerminatedEvent,
    StreamingQueryListener,
    StreamingQueryProgress,
    iso_timestamp,
)

if TYPE_CHECKING:
    from ._engine import MicroBatchEngine
    from ._registry import ConnectorRegistry

__all__ = ["StreamingQuery", "StreamingQueryManager"]

log = logging.getLogger("microbatch.query")
RECENT_PROGRESS = 100


class StreamingQuery:
    """A handle on a running (or finished) query, as returned by ``write_stream.start()``.

    ``id`` stays the same across restarts from one checkpoint; ``run_id`` is new each start.
    """

    def __init__(
        self,
        *,
        query_id: str,
        name: str | None,
        manager: StreamingQueryManager,
        explain_lines: list[str],
        secrets: list[str],
        on_end: Callable[[bool], None],
    ) -> None:
        self.id = query_id
        self.run_id = str(uuid.uuid4())
        self.name = name
        self._manager = manager
        self._explain_lines = explain_lines
        self._secrets = secrets
        self._redactor = redactor(secrets)
        self._on_end = on_end
        self._engine: MicroBatchEngine | None = None
        self._stop_timeout = 0.0
        """The session's ``stopTimeout`` in seconds (0: wait as long as a batch takes)."""
        self._thread: threading.Thread | None = None
        self._terminated = threading.Event()
        self._exception: StreamingQueryException | None = None
        self._recent: deque[StreamingQueryProgress] = deque(maxlen=RECENT_PROGRESS)
        self._status = {
            "message": "Initializing StreamExecution",
            "isDataAvailable": False,
            "isTriggerActive": False,
        }

    # -- public API -----------------------------------------------------------------------
    @property
    def is_active(self) -> bool:
        return not self._terminated.is_set()

    @property
    def status(self) -> dict[str, Any]:
        """``{"message", "isDataAvailable", "isTriggerActive"}``, as Spark reports it."""
        return dict(self._status)

    @property
    def last_progress(self) -> StreamingQueryProgress | None:
        return self._recent[-1] if self._recent else None

    @property
    def recent_progress(self) -> list[StreamingQueryProgress]:
        return list(self._recent)

    def exception(self) -> StreamingQueryException | None:
        """The error that terminated the query, or ``None``."""
        return self._exception

    def await_termination(self, timeout: float | None = None) -> bool | None:
        """Wait for the query to end; re-raise its error if it failed.

        Without a timeout returns ``None`` once terminated; with one returns whether it ended.
        """
        if timeout is not None and timeout <= 0:
            raise ConfigurationError(f"timeout must be positive, got {timeout}")
        self._refuse_on_query_thread("await_termination")
        ended = self._terminated.wait(timeout)
        if self._exception is not None:
            raise self._exception
        return ended if timeout is not None else None

    def process_all_available(self, timeout: float | None = None) -> bool:
        """Block until everything available now is processed and committed.

        Returns ``True`` once the query has caught up: a trigger that started after this call
        found nothing new, every batch before it committed. Returns ``True`` at once, too, on
        a query that has ended (nothing more will be processed). With ``timeout`` (seconds),
        returns ``False`` when it passes first; the query keeps running. A source that always
        has new data (``rate``, ``rate-micro-batch``) may never catch up: give it a timeout.
        Raises the query's error if it fails meanwhile.
        """
        if timeout is not None and timeout <= 0:
            raise ConfigurationError(f"timeout must be positive, got {timeout}")
        self._refuse_on_query_thread("process_all_available")
        engine = self._engine
        if engine is None or not self.is_active:
            if self._exception is not None:
                raise self._exception
            return True
        called_at = time.time()
        deadline = None if timeout is None else time.monotonic() + timeout
        caught_up = True
        engine.wake.set()
        with engine.idle_condition:
            while engine.caught_up_at < called_at and self.is_active:
                remaining = 0.05 if deadline is None else min(0.05, deadline - time.monotonic())
                if remaining <= 0:
                    caught_up = False
                    break
                engine.idle_condition.wait(remaining)
        if self._exception is not None:
            raise self._exception
        return caught_up

    def stop(self, timeout: float | None = None) -> None:
        """Stop the query and wait for its thread to finish (idempotent).

        A batch in progress completes first, so a stop never leaves a half-applied batch.
        ``timeout`` (seconds, like Spark's ``spark.sql.streaming.stopTimeout``) bounds the
        wait: when the query's thread still runs then (a batch that does not finish, a sink
        that hangs), :class:`~microbatch.errors.QueryStopTimeoutError` is raised. The stop
        request stands and the query stops, with its checkpoint intact, once the batch ends;
        call ``stop()`` or ``await_termination()`` again to wait for that. Without a timeout,
        the session's ``stopTimeout`` applies; when that is 0 (the default), ``stop()`` waits
        as long as the batch takes.
        """
        if timeout is not None and timeout <= 0:
            raise ConfigurationError(f"timeout must be positive, got {timeout}")
        if timeout is None and self._stop_timeout > 0:
            timeout = self._stop_timeout
        if self._engine is not None:
            self._engine.request_stop()
        if self._thread is None or self._thread is threading.current_thread():
            return
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise QueryStopTimeoutError(
                f"Query [id = {self.id}, run_id = {self.run_id}] did not stop within "
                f"{timeout:g} s: {self._status['message']!s}. The stop request stands: the "
                "query stops once its running batch ends (its checkpoint stays consistent); "
                "call stop() or await_termination() to wait for it.",
                query_id=self.id,
                run_id=self.run_id,
            )

    def explain(self, extended: bool = False) -> None:
        """Print the query's plan: source, transforms, sink (with options when ``extended``)."""
        lines = (
            self._explain_lines
            if extended
            else [line for line in self._explain_lines if not line.startswith("    option ")]
        )
        print("\n".join(self._redactor.text(line) for line in lines))

    def _refuse_on_query_thread(self, method: str) -> None:
        if self._thread is threading.current_thread():
            raise ConfigurationError(
                f"{method}() was called on the query's own thread (from a listener or a sink "
                "function), where it would wait forever; call it from another thread"
            )

    def __repr__(self) -> str:
        state = "active" if self.is_active else "terminated"
        return f"<StreamingQuery id={self.id} run_id={self.run_id} name={self.name} {state}>"

    # -- wiring with the engine ---------------------------------------------------------
    def _launch(self, engine: MicroBatchEngine) -> None:
        self._engine = engine
        self._manager._started(self)
        self._thread = threading.Thread(
            target=self._run, name=f"microbatch-query-{self.name or self.id[:8]}", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        assert self._engine is not None
        failed = False
        try:
            self._engine.run()
            self._set_status("Stopped", False, False)
        except BaseException as error:
            failed = True
            # The whole chain is redacted (messages, notes, causes, frame locals), not only the
            # message: users, listeners and logs see the same cleaned error.
            exception = StreamingQueryException(
                query_id=self.id, run_id=self.run_id, cause=self._redactor.error(error)
            )
            message = self._redactor.text(str(exception))
            exception.args = (message,)
            self._exception = exception
            self._set_status(f"Terminated with exception: {message}", False, False)
            log.error("%s", message, exc_info=exception)
        finally:
            try:
                self._on_end(failed)
            finally:
                self._manager._deactivate(self)
                self._terminated.set()
                self._manager._announce_termination(self)

    def _set_status(self, message: str, data: bool, active: bool) -> None:
        message = self._redactor.text(message)
        self._status = {"message": message, "isDataAvailable": data, "isTriggerActive": active}

    def _record(self, progress: StreamingQueryProgress) -> None:
        progress = self._redactor.value(progress)
        self._recent.append(progress)
        self._manager._post_progress(progress)

    def _record_idle(self, progress: StreamingQueryProgress) -> None:
        progress = self._redactor.value(progress)
        self._recent.append(progress)
        self._manager._post_idle(
            QueryIdleEvent(id=self.id, run_id=self.run_id, timestamp=progress["timestamp"]),
            progress,
        )


class StreamingQueryManager:
    """The queries of one session (``session.streams``) and its listeners."""

    def __init__(self, registry: ConnectorRegistry) -> None:
        self._registry = registry
        self._lock = threading.Condition()
        self._active: dict[str, StreamingQuery] = {}
        self._last_terminated: StreamingQuery | None = None
        self._listeners: list[StreamingQueryListener] = []

    @property
    def active(self) -> list[StreamingQuery]:
        with self._lock:
            return list(self._active.values())

    def get(self, query_id: str) -> StreamingQuery | None:
        """The active query with this id (or run id), else ``None``."""
        with self._lock:
            for query in self._active.values():
                if query_id in (query.id, query.run_id):
                    return query
        return None

    def await_any_termination(self, timeout: float | None = None) -> bool | None:
        """Wait until any query terminates (since creation or :meth:`reset_terminated`);
        re-raise its error if it failed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while self._last_terminated is None:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._lock.wait(remaining)
            error = self._last_terminated.exception()
        if error is not None:
            raise error
        return True if timeout is not None else None

    def reset_terminated(self) -> None:
        with self._lock:
            self._last_terminated = None

    def add_listener(self, listener: StreamingQueryListener) -> None:
        with self._lock:
            self._listeners.append(listener)

    def remove_listener(self, listener: StreamingQueryListener) -> None:
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    # -- events -------------------------------------------------------------------------
    def _check_name(self, name: str | None) -> None:
        if name is None:
            return
        with self._lock:
            if any(query.name == name for query in self._active.values()):
                raise ConfigurationError(
                    f"Cannot start query with name {name} as a query with that name is already "
                    "active in this session"
                )

    def _started(self, query: StreamingQuery) -> None:
        with self._lock:
            self._active[query.run_id] = query
        event = QueryStartedEvent(
            id=query.id, run_id=query.run_id, name=query.name, timestamp=iso_timestamp(time.time())
        )
        self._notify("on_query_started", event)
        self._hook("microbatch_query_started", event=event)

    def _deactivate(self, query: StreamingQuery) -> None:
        """The query no longer counts as active (before ``await_termination`` returns)."""
        with self._lock:
            self._active.pop(query.run_id, None)
            self._last_terminated = query
            self._lock.notify_all()

    def _announce_termination(self, query: StreamingQuery) -> None:
        error = query.exception()
        event = QueryTerminatedEvent(
            id=query.id,
            run_id=query.run_id,
            exception=str(error) if error is not None else None,
            error_class=type(error.cause).__name__ if error is not None else None,
        )
        self._notify("on_query_terminated", event)
        self._hook("microbatch_query_terminated", event=event)

    def _post_progress(self, progress: StreamingQueryProgress) -> None:
        self._notify("on_query_progress", progress)
        self._hook("microbatch_query_progress", progress=progress)

    def _post_idle(self, event: QueryIdleEvent, progress: StreamingQueryProgress) -> None:
        self._notify("on_query_idle", event)
        self._hook("microbatch_query_progress", progress=progress)

    def _notify(self, callback: str, event: Any) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            try:
                getattr(listener, callback)(event)
            except Exception:
                log.exception("listener %r failed in %s (ignored)", listener, callback)

    def _hook(self, name: str, **kwargs: Any) -> None:
        try:
            getattr(self._registry.plugin_manager.hook, name)(**kwargs)
        except Exception:
            log.exception("a plugin failed in hook %s (ignored)", name)
