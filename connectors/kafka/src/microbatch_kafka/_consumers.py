"""A process-local pool of Kafka consumers, so that reading a split costs no connection setup.

Opening a consumer costs a connection and a metadata round trip; a query reading a batch every
few milliseconds would pay it per split. Consumers are kept per ``(settings, process id)``,
as :class:`Lease`\\ s: a split reader borrows one, reads its range, and gives it back still
assigned at the range's end (:attr:`Lease.tag`), so that the next batch's split of the same
partition, which starts there, finds the records already fetched and needs no seek. A split
reader asking for another position gets an idle consumer that is not assigned, a new one
(up to ``_MAX_OPEN`` per settings), or else the least recently used one, re-assigned.

A consumer is never used in another process than the one that opened it (after ``fork`` the
child opens its own and leaves the inherited ones alone). A consumer whose read failed is
closed, not given back.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

__all__ = ["POOL", "ConsumerPool", "Lease", "settings_key"]

log = logging.getLogger("microbatch.kafka")

SettingsKey = tuple[tuple[str, str], ...]
Tag = tuple[str, int, int]

_MAX_OPEN = 32
"""Consumers per settings before idle ones are re-assigned instead of new ones opened."""


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


class ConsumerPool:
    """Idle consumers by settings, for the current process only."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: dict[tuple[SettingsKey, int], list[Lease]] = {}
        self._open: dict[tuple[SettingsKey, int], int] = {}
        self.opened = 0
        """Consumers opened by this pool (for tests)."""

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
            consumer = Consumer(dict(settings))
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
