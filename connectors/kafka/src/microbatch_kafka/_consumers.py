"""A process-local pool of Kafka consumers, so that reading a split costs no connection setup.

Opening a consumer costs a connection and a metadata round trip; a query reading a batch every
few milliseconds would pay it per split. Consumers are kept per ``(settings, process id)``,
as :class:`Lease`\\ s: a split reader borrows one, reads its range, and gives it back still
assigned at the range's end (:attr:`Lease.tag`), so that the next batch's split of the same
partition, which starts there, finds the records already fetched and needs no seek. A split
reader asking for another position gets an idle consumer that is not assigned, a new one
(up to ``_MAX_OPEN`` per settings), or else the least recently used one, re-assigned.

An idle consumer assigned to a partition keeps fetching (its prefetch is what lets the next
split start at once), but not for long: :meth:`ConsumerPool.maintain` (called by the stream
reader at each trigger) pauses the ones idle for ``_PAUSE_AFTER`` seconds (resumed when
borrowed) and closes the ones idle for ``_CLOSE_AFTER`` seconds. At most one idle consumer
stays assigned per partition.

A consumer is never used in another process than the one that opened it (after ``fork`` the
child opens its own and leaves the inherited ones alone). A consumer whose read failed is
closed, not given back.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

__all__ = ["POOL", "ConsumerPool", "Lease", "settings_key", "with_logger"]

log = logging.getLogger("microbatch.kafka")


def with_logger(settings: Mapping[str, str]) -> dict[str, Any]:
    """``settings`` for a librdkafka consumer whose own log lines go to the
    ``microbatch.kafka`` logger (at the levels the client maps them to) instead of stderr;
    they are handed over when the consumer is polled."""
    return {**settings, "logger": log}


SettingsKey = tuple[tuple[str, str], ...]
Tag = tuple[str, int, int]

_MAX_OPEN = 32
"""Consumers per settings before idle ones are re-assigned instead of new ones opened."""
_PAUSE_AFTER = 0.5
"""Seconds an idle assigned consumer keeps fetching before it is paused."""
_CLOSE_AFTER = 30.0
"""Seconds an idle consumer is kept open."""
_MAINTAIN_EVERY = 0.25


def settings_key(settings: Mapping[str, str]) -> SettingsKey:
    """A hashable, order-independent form of librdkafka settings."""
    return tuple(sorted((str(k), str(v)) for k, v in settings.items()))


@dataclass
class Lease:
    """A pooled consumer and where it stands.

    ``tag`` is ``(topic, partition, offset)`` when the consumer is assigned to that partition
    only and the next record it delivers is the first at or after ``offset``, apart from
    ``leftover``: records it delivered already, at or after ``offset``, that the split reader
    did not take. ``None``: assign before use.
    """

    consumer: Any
    tag: Tag | None = None
    leftover: list[Any] = field(default_factory=list)
    parked_at: float = 0.0
    """When it was given back (``time.monotonic()``)."""
    paused: bool = False
    """Whether its partition is paused (it is resumed when borrowed)."""


class ConsumerPool:
    """Idle consumers by settings, for the current process only."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: dict[tuple[SettingsKey, int], list[Lease]] = {}
        self._open: dict[tuple[SettingsKey, int], int] = {}
        self.opened = 0
        """Consumers opened by this pool (for tests)."""
        self._maintained_at = float("-inf")

    @contextmanager
    def borrow(self, settings: Mapping[str, str], want: Tag | None = None) -> Iterator[Lease]:
        """A consumer with ``settings``, preferably one tagged ``want``; given back when the
        block ends normally (keep its :attr:`Lease.tag` up to date, or set it to ``None``),
        closed when the block raises."""
        key = (settings_key(settings), os.getpid())
        with self._lock:
            lease = self._pick(key, want)
            if lease is None:
                self._open[key] = self._open.get(key, 0) + 1
        if lease is None:
            lease = self._new(settings, key)
        elif lease.paused:
            try:
                self._resume(lease)
            except BaseException:
                self._discard(key, lease)
                raise
        try:
            yield lease
        except BaseException:
            self._discard(key, lease)
            raise
        self._give_back(key, lease)

    def _pick(self, key: tuple[SettingsKey, int], want: Tag | None) -> Lease | None:
        idle = self._idle.get(key, [])
        if not idle:
            return None
        for index, lease in enumerate(idle):
            if want is not None and lease.tag == want:
                return idle.pop(index)
        for index, lease in enumerate(idle):
            if lease.tag is None:
                return idle.pop(index)
        if self._open.get(key, 0) < _MAX_OPEN:
            return None  # open another rather than move one (a move waits for its fetch)
        for index, lease in enumerate(idle):
            if want is not None and lease.tag is not None and lease.tag[:2] == want[:2]:
                return idle.pop(index)
        return idle.pop(0)  # the least recently used

    def _new(self, settings: Mapping[str, str], key: tuple[SettingsKey, int]) -> Lease:
        from confluent_kafka import Consumer

        try:
            consumer = Consumer(with_logger(settings))
        except BaseException:
            with self._lock:
                self._open[key] -= 1
            raise
        with self._lock:
            self.opened += 1
        return Lease(consumer)

    def _give_back(self, key: tuple[SettingsKey, int], lease: Lease) -> None:
        if lease.tag is None:
            lease.leftover = []
            try:
                lease.consumer.unassign()  # stop fetching what nobody will read
            except Exception:  # a consumer that cannot even do that is not worth keeping
                self._discard(key, lease)
                return
        lease.parked_at = time.monotonic()
        with self._lock:
            idle = self._idle.setdefault(key, [])
            # at most one idle consumer assigned per partition: the newest
            older = [
                other
                for other in idle
                if lease.tag is not None
                and other.tag is not None
                and other.tag[:2] == lease.tag[:2]
            ]
            for other in older:
                idle.remove(other)
            idle.append(lease)
        for other in older:
            self._park_unassigned(key, other)

    def _park_unassigned(self, key: tuple[SettingsKey, int], lease: Lease) -> None:
        lease.tag, lease.leftover, lease.paused = None, [], False
        try:
            lease.consumer.unassign()
        except Exception:
            self._discard(key, lease)
            return
        with self._lock:
            self._idle.setdefault(key, []).append(lease)

    @staticmethod
    def _resume(lease: Lease) -> None:
        from confluent_kafka import TopicPartition

        if lease.tag is not None:
            lease.consumer.resume([TopicPartition(lease.tag[0], lease.tag[1])])
        lease.paused = False

    def maintain(self, settings: Mapping[str, str]) -> None:
        """Pause this process's idle consumers with ``settings`` that have been fetching for
        ``_PAUSE_AFTER`` seconds, close the ones idle for ``_CLOSE_AFTER`` seconds (at most
        every ``_MAINTAIN_EVERY`` seconds; cheap otherwise)."""
        now = time.monotonic()
        if now - self._maintained_at < _MAINTAIN_EVERY:
            return
        self._maintained_at = now
        key = (settings_key(settings), os.getpid())
        with self._lock:
            idle = self._idle.get(key, [])
            stale = [lease for lease in idle if now - lease.parked_at >= _CLOSE_AFTER]
            fetching = [
                lease
                for lease in idle
                if lease not in stale
                and lease.tag is not None
                and not lease.paused
                and now - lease.parked_at >= _PAUSE_AFTER
            ]
            for lease in stale + fetching:
                idle.remove(lease)
        for lease in stale:
            self._discard(key, lease)
        if not fetching:
            return
        from confluent_kafka import TopicPartition

        for lease in fetching:
            assert lease.tag is not None
            try:
                lease.consumer.pause([TopicPartition(lease.tag[0], lease.tag[1])])
                lease.paused = True
            except Exception:
                self._discard(key, lease)
                continue
            with self._lock:
                self._idle.setdefault(key, []).append(lease)

    def _discard(self, key: tuple[SettingsKey, int], lease: Lease) -> None:
        with self._lock:
            self._open[key] = max(0, self._open.get(key, 0) - 1)
        _close(lease.consumer)

    def close(self, settings: Mapping[str, str]) -> None:
        """Close this process's idle consumers with ``settings``."""
        key = (settings_key(settings), os.getpid())
        with self._lock:
            idle = self._idle.pop(key, [])
            self._open[key] = max(0, self._open.get(key, 0) - len(idle))
            if not self._open[key]:
                del self._open[key]
        for lease in idle:
            _close(lease.consumer)

    def idle_states(self, settings: Mapping[str, str]) -> list[tuple[Tag | None, bool]]:
        """``(tag, paused)`` of each idle consumer with ``settings`` (for tests)."""
        with self._lock:
            idle = self._idle.get((settings_key(settings), os.getpid()), [])
            return [(lease.tag, lease.paused) for lease in idle]

    def idle_count(self, settings: Mapping[str, str]) -> int:
        """How many idle consumers with ``settings`` this process holds."""
        with self._lock:
            return len(self._idle.get((settings_key(settings), os.getpid()), []))


def _close(consumer: Any) -> None:
    try:
        consumer.close()
    except Exception as error:  # closing is best effort
        log.debug("closing a Kafka consumer failed: %s", error)


POOL = ConsumerPool()
"""The pool every split reader of this process borrows from."""


def _after_fork_in_child() -> None:
    # another thread may have held the lock at fork time; the parent's consumers stay
    # untouched under the parent's process id
    POOL._lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
