"""Waking an idle query as soon as a record arrives, instead of at its next poll.

An idle query asks the source for new offsets every few milliseconds. The watcher shortens
that wait: when a trigger finds nothing new, the stream reader :meth:`~Watcher.arm`\\ s it at
the latest offsets; a consumer on a thread of its own long-polls the broker there, and the
first record that arrives calls the query's ``wake``. When a batch runs, the reader
:meth:`~Watcher.disarm`\\ s it, so that it never reads the records the batch reads. The watcher
reads at most a few records per idle period and holds no offsets: losing it (a broker error,
a failure to start) only makes the query wait for its next poll.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from ._offsets import PartitionOffsets

__all__ = ["Watcher"]

log = logging.getLogger("microbatch.kafka")

_WATCH_SETTINGS = {
    "fetch.wait.max.ms": "100",  # the broker answers at once when a record arrives
    "enable.partition.eof": "false",
    "fetch.max.bytes": "65536",
    "queued.min.messages": "1",
}


class Watcher:
    """Calls ``wake`` when a record arrives beyond the offsets it was armed at.

    ``settings`` are the source's consumer settings. Thread-safe; :meth:`close` ends it.
    """

    def __init__(self, settings: Mapping[str, str], wake: Callable[[], None]) -> None:
        self._settings = {**settings, **_WATCH_SETTINGS}
        self._wake = wake
        self._lock = threading.Lock()
        self._armed: PartitionOffsets | None = None
        self._consumer: Any = None
        self._thread: threading.Thread | None = None
        self._closed = threading.Event()
        self._broken = False

    def arm(self, latest: PartitionOffsets) -> None:
        """Watch for records at or beyond ``latest`` (the query is idle there)."""
        with self._lock:
            if self._broken or self._closed.is_set() or self._armed == latest:
                return
            try:
                consumer = self._start()
                from confluent_kafka import TopicPartition

                consumer.assign([TopicPartition(t, p, o) for (t, p), o in sorted(latest.items())])
            except Exception as error:  # the query then waits for its polls: no harm
                self._broken = True
                log.debug("the Kafka source's new-data watcher is off: %s", error)
                return
            self._armed = dict(latest)

    def disarm(self) -> None:
        """Stop watching (a batch reads the new records)."""
        with self._lock:
            if self._armed is None or self._consumer is None:
                return
            self._armed = None
            try:
                self._consumer.unassign()
            except Exception as error:
                log.debug("the Kafka source's new-data watcher could not stop watching: %s", error)

    def close(self) -> None:
        """End the thread and close the consumer (idempotent)."""
        self._closed.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout=5)
        with self._lock:
            consumer, self._consumer = self._consumer, None
        if consumer is not None:
            try:
                consumer.close()
            except Exception as error:
                log.debug("closing the Kafka source's new-data watcher failed: %s", error)

    def _start(self) -> Any:
        if self._consumer is None:
            from confluent_kafka import Consumer

            self._consumer = Consumer(dict(self._settings))
            self._thread = threading.Thread(
                target=self._run, name="microbatch-kafka-watcher", daemon=True
            )
            self._thread.start()
        return self._consumer

    def _run(self) -> None:
        consumer = self._consumer
        while not self._closed.is_set():
            try:
                messages = consumer.consume(16, 0.1)
            except Exception as error:  # closed under us, or a client failure
                log.debug("the Kafka source's new-data watcher stopped: %s", error)
                return
            if any(message.error() is None for message in messages):
                with self._lock:
                    armed = self._armed is not None
                    if armed:
                        self._armed = None
                        with contextlib.suppress(Exception):
                            consumer.unassign()
                if armed:
                    self._wake()
