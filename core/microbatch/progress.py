"""Progress records and query events, shaped like Spark's.

:class:`StreamingQueryProgress` is a dict with Spark's camelCase keys (``batchId``,
``numInputRows``, ``durationMs``...) that also allows attribute access in snake_case
(``progress.batch_id``), and renders with :attr:`~StreamingQueryProgress.json`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

__all__ = [
    "QueryIdleEvent",
    "QueryStartedEvent",
    "QueryTerminatedEvent",
    "StreamingQueryListener",
    "StreamingQueryProgress",
    "iso_timestamp",
]


def iso_timestamp(epoch_seconds: float) -> str:
    """``2026-11-29T12:32:44.204Z``: Spark's timestamp format for progress and events."""
    moment = datetime.fromtimestamp(epoch_seconds, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


class StreamingQueryProgress(dict[str, Any]):
    """One progress record: Spark's JSON keys, in Spark's order."""

    def __getattr__(self, name: str) -> Any:
        for key in (name, _camel(name)):
            if key in self:
                return self[key]
        raise AttributeError(name)

    @property
    def json(self) -> str:
        return json.dumps(self, default=str)

    @property
    def pretty_json(self) -> str:
        return json.dumps(self, default=str, indent=2)


@dataclass(frozen=True)
class QueryStartedEvent:
    id: str
    run_id: str
    name: str | None
    timestamp: str


@dataclass(frozen=True)
class QueryIdleEvent:
    id: str
    run_id: str
    timestamp: str


@dataclass(frozen=True)
class QueryTerminatedEvent:
    id: str
    run_id: str
    exception: str | None
    error_class: str | None = None


class StreamingQueryListener:
    """Subclass and override the callbacks you need; add with ``session.streams.add_listener``.

    ``on_query_started`` runs on the caller's thread before ``start()`` returns; the others run
    on the query's thread. An exception in a callback is logged and never stops the query.
    """

    def on_query_started(self, event: QueryStartedEvent) -> None:
        """A query started."""

    def on_query_progress(self, progress: StreamingQueryProgress) -> None:
        """A batch completed."""

    def on_query_idle(self, event: QueryIdleEvent) -> None:
        """A trigger found no new data (at most once per idle-progress interval)."""

    def on_query_terminated(self, event: QueryTerminatedEvent) -> None:
        """The query ended; ``event.exception`` is ``None`` on a clean stop."""
