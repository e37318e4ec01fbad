"""Waking an idle query as soon as a record arrives, instead of at its next poll.

An idle query asks the source for new offsets every few milliseconds. The watcher shortens
that wait: when a trigger finds nothing new, the stream reader :meth:`~Watcher.arm`\\ s it at
the latest offsets; a consumer on a thread of its own long-polls the broker there, and the
first record that arrives calls the query's ``wake``. When a batch runs, the reader
:meth:`~Watcher.disarm`\\ s it, so that it never reads the records the batch reads. The watcher
reads at most a few records per idle period and holds no offsets: losing it (a broker error,
a failure to start) only makes the query wait for its next poll. Only the watcher's thread
calls its consumer (a librdkafka call on a consumer that another thread is polling waits for
that poll to give way, which an endless poll loop never does).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from ._offsets import PartitionOffsets

__all__ = ["Watcher"]

log = logging.getLogger("microbatch.kafka")

_WATCH_SETTINGS = {
    # a long poll: the broker answers at once when a record arrives, and an idle watcher
    # sends a few fetch requests a second only
    "fetch.wait.max.ms": "500",
    "enable.partition.eof": "false",
    # little prefetch (fetch.max.bytes may not go below message.max.bytes)
    "fetch.message.max.bytes": "65536",
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
        self._pending: PartitionOffsets | None = None
        """The assignment the thread is to make next ({} = none), or None (no change)."""
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
                self._start()
            except Exception as error:  # the query then waits for its polls: no harm
                self._broken = True
                log.warning(
                    "the Kafka source's new-data watcher is off (the query notices new records "
                    "at its next poll instead): %s",
                    error,
                )
                return
            self._armed = dict(latest)
            self._pending = dict(latest)

    def disarm(self) -> None:
        """Stop watching (a batch reads the new records)."""
        with self._lock:
            if self._armed is None:
                return
            self._armed = None
            self._pending = {}

    def close(self) -> None:
        """End the thread and close the consumer (idempotent)."""
        self._closed.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout=5)
            if thread.is_alive():  # stuck in the client: it closes nothing under the thread
                return
        with self._lock:
            consumer, self._consumer = self._consumer, None
        if consumer is not None:
            try:
                consumer.close()
            except Exception as error:
                log.debug("closing the Kafka source's new-data watcher failed: %s", error)

    def _start(self) -> None:
        if self._consumer is None:
            from confluent_kafka import Consumer

            from ._consumers import with_logger

            self._consumer = Consumer(with_logger(self._settings))
            self._thread = threading.Thread(
                target=self._run, name="microbatch-kafka-watcher", daemon=True
            )
            self._thread.start()

    def _run(self) -> None:
        from confluent_kafka import TopicPartition

        consumer = self._consumer
        while not self._closed.is_set():
            try:
                with self._lock:
                    pending, self._pending = self._pending, None
                if pending:
                    consumer.assign(
                        [TopicPartition(t, p, o) for (t, p), o in sorted(pending.items())]
                    )
                elif pending is not None:
                    consumer.unassign()
                messages = consumer.consume(16, 0.1)
            except Exception as error:  # closed under us, or a client failure
                if not self._closed.is_set():
                    with self._lock:
                        self._broken = True
                    log.warning(
                        "the Kafka source's new-data watcher stopped (the query notices new "
                        "records at its next poll instead): %s",
                        error,
                    )
                return
            if any(message.error() is None for message in messages):
                with self._lock:
                    armed = self._armed is not None and self._pending is None
                    if armed:
                        self._armed = None
                        self._pending = {}
                if armed:
                    self._wake()
